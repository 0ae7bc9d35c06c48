"""Streaming pipeline: JSON events dropped into a directory -> per-minute windowed
aggregation per user -> Parquet files, exactly-once.

Events are files of JSON lines {"user": "u1", "ts": "2026-01-01T00:00:05", "amount": 3}.
The file source is replayable and the file sink is exactly-once; the query's checkpoint
lives in ctx.checkpoint_dir (under high-availability.storageDir), so an attempt of this
job on any peer resumes from the last committed micro-batch.

    jm submit examples/streaming_events.py --arg input=/data/events --arg output=/data/agg
"""
import os


def main(ctx):
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

    spark = ctx.spark
    source, sink = ctx.args["input"], ctx.args["output"]
    schema = StructType([StructField("user", StringType()), StructField("ts", TimestampType()),
                         StructField("amount", LongType())])
    events = (spark.readStream.schema(schema)
              .option("maxFilesPerTrigger", int(ctx.args.get("files-per-trigger", 4)))
              .json(source))
    per_minute = (events.withWatermark("ts", ctx.args.get("watermark", "0 seconds"))
                  .groupBy(F.window("ts", ctx.args.get("window", "1 minute")), "user")
                  .agg(F.count("*").alias("events"), F.sum("amount").alias("amount"))
                  .select(F.col("window.start").alias("window_start"), "user", "events",
                          "amount"))
    query = (per_minute.writeStream.format("parquet").outputMode("append")
             .option("path", sink)
             .option("checkpointLocation", os.path.join(ctx.checkpoint_dir, "events"))
             .trigger(processingTime=ctx.args.get("trigger", "1 second"))
             .start())
    print(f"[streaming_events] query {query.id} started, attempt {ctx.attempt}", flush=True)
    # until the query fails (raised here) or the job is stopped, cancelled or moved (the
    # query is then stopped between micro-batches: nothing committed twice, nothing lost)
    ctx.await_termination(query)
    return {"query": str(query.id), "stopped": True}
