"""The pipelines bench/density.py runs (importable by job processes through `pyfiles`).

`pipeline`: a small event pipeline as the seed describes it: a file source fed a record
now and then, a filter, a JSON file sink, trigger 1 s, its checkpoint in the job's own
checkpoint dir (exactly once across restarts). Each record carries the time it was
written (`t`); the sink file's modification time minus `t` is its latency.

`oom`: one statement that runs its engine out of memory (a collect_list of 200,000
strings of 100 KB), for the blast radius.
"""


def pipeline(ctx):
    spark = ctx.spark
    src = spark.readStream.schema("t DOUBLE, v LONG").json(ctx.args["input"])
    query = (src.filter("v >= 0").writeStream.format("json")
             .option("path", ctx.args["output"])
             .option("checkpointLocation", ctx.checkpoint_dir)
             .trigger(processingTime=ctx.args.get("trigger", "1 second"))
             .start())
    print("pipeline started", flush=True)
    if ctx.args.get("poll"):  # the older way: a look at the query every `poll` s
        while not ctx.stop_requested.wait(float(ctx.args["poll"])):
            if not query.isActive:
                raise RuntimeError(f"the query stopped: {query.exception()}")
        query.stop()
        return "stopped"
    ctx.await_termination(query)
    return "stopped"


def oom(ctx):
    from pyspark.sql import functions as F
    rows = int(ctx.args.get("rows", 200_000))
    size = int(ctx.args.get("size", 100_000))
    df = ctx.spark.range(rows).select(F.repeat(F.lit("x"), size).alias("s"))
    return len(df.agg(F.collect_list("s")).collect()[0][0])


def one_row(ctx):
    """A small query (bench/engine_start.py): what a job's start costs with its engine."""
    return ctx.spark.range(1).count()
