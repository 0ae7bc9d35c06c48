"""examples/streaming_events.py as a spark-submit style application: JSON event files ->
per-minute counts per user -> Parquet, exactly once, checkpointed in $JM_CHECKPOINT_DIR.

    events_script.py INPUT_DIR OUTPUT_DIR
"""
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

source, sink = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.appName("events-script").getOrCreate()
schema = StructType([StructField("user", StringType()), StructField("ts", TimestampType()),
                     StructField("amount", LongType())])
events = spark.readStream.schema(schema).option("maxFilesPerTrigger", 2).json(source)
per_minute = (events.withWatermark("ts", "0 seconds")
              .groupBy(F.window("ts", "1 minute"), "user")
              .agg(F.count("*").alias("events"), F.sum("amount").alias("amount"))
              .select(F.col("window.start").alias("window_start"), "user", "events", "amount"))
query = (per_minute.writeStream.format("parquet").outputMode("append").option("path", sink)
         .option("checkpointLocation", os.path.join(os.environ["JM_CHECKPOINT_DIR"], "events"))
         .trigger(processingTime="1 second").start())
print(f"[events_script] query started, attempt {os.environ['JM_ATTEMPT']}", flush=True)
query.awaitTermination()
print("[events_script] query stopped; the application ends by itself", flush=True)
spark.stop()
