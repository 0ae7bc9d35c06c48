"""Streaming job entry points for tests/integration/test_streaming_progress.py and
bench/listener.py (run in job processes, on the peer's Spark Connect server)."""
import statistics
import time


def _query(ctx, name: str, rate: int):
    """A rate source counted per key (a stateful aggregation: state rows), into the noop
    sink, one micro-batch a second."""
    from pyspark.sql import functions as F
    df = (ctx.spark.readStream.format("rate").option("rowsPerSecond", rate).load()
          .withColumn("k", F.col("value") % 10).groupBy("k").count())
    return (df.writeStream.queryName(name).outputMode("update").format("noop")
            .option("checkpointLocation", f"{ctx.checkpoint_dir}/{name}")
            .trigger(processingTime="1 second").start())


def rates(ctx):
    """Runs until stopped; prints a line per batch it sees (the stdout tee's input)."""
    print("progress job started", flush=True)
    q = _query(ctx, ctx.args.get("name", "rates"), int(ctx.args.get("rate", 50)))
    seen = -1
    while not ctx.stop_requested.wait(0.5):
        p = q.lastProgress
        if p is not None and p["batchId"] != seen:
            seen = p["batchId"]
            print(f"batch {seen} rows {p['numInputRows']}", flush=True)
    q.stop()
    return {"batches": seen + 1}


def batch_durations(ctx):
    """The bench: `batches` micro-batches, their durations (ms, triggerExecution) as the
    query itself measured them; the first two (start-up) left out."""
    q = _query(ctx, "bench", int(ctx.args.get("rate", 1000)))
    want = int(ctx.args.get("batches", 20)) + 2
    durations: dict = {}
    deadline = time.monotonic() + 10 * want + 60
    while len(durations) < want and time.monotonic() < deadline:
        for p in q.recentProgress:
            durations[p["batchId"]] = p["durationMs"].get("triggerExecution", 0)
        time.sleep(0.2)  # (the job's own pace of looking, not a test's wait)
    q.stop()
    kept = [durations[b] for b in sorted(durations)][2:want]
    return {"durations": kept, "median": statistics.median(kept) if kept else None}


def console_rates(ctx):
    """A rate source into the console sink (what Spark's examples do), until stopped."""
    name = ctx.args.get("name", "to_console")
    q = (ctx.spark.readStream.format("rate").option("rowsPerSecond", 5).load()
         .writeStream.queryName(name).format("console")
         .option("checkpointLocation", f"{ctx.checkpoint_dir}/{name}")
         .trigger(processingTime="1 second").start())
    ctx.stop_requested.wait()
    q.stop()
    return {"stopped": name}


def hog(ctx):
    """A streaming job whose every micro-batch with input runs its engine out of memory: each
    row of a rate source becomes 200,000 strings of 100 KB, all collected into one list.
    Restarted from its checkpoint, it runs the same micro-batch again."""
    from pyspark.sql import functions as F
    rows = int(ctx.args.get("rows", 200_000))
    df = (ctx.spark.readStream.format("rate").option("rowsPerSecond", 1).load()
          .select(F.explode(F.sequence(F.lit(1), F.lit(rows))).alias("i"))
          .select(F.repeat(F.lit("x"), 100_000).alias("s"))
          .groupBy().agg(F.size(F.collect_list("s")).alias("n")))
    q = (df.writeStream.queryName("hog").outputMode("complete").format("noop")
         .option("checkpointLocation", f"{ctx.checkpoint_dir}/hog")
         .trigger(processingTime="1 second").start())
    print(f"hog query {q.id} started", flush=True)
    ctx.await_termination(q)
    return "stopped"
