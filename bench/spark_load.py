"""A busy Spark job for bench/soak.py: runs small aggregations until `seconds` pass
(or it is asked to stop) and returns how many queries it ran."""
import time


def main(ctx):
    from pyspark.sql import functions as F
    spark = ctx.spark
    deadline = time.time() + float(ctx.args.get("seconds", 600))
    queries = 0
    while time.time() < deadline and not ctx.stop_requested.is_set():
        n = 200_000 + 1000 * (queries % 50)
        spark.range(n).select((F.col("id") % 97).alias("k")).groupBy("k").count().collect()
        queries += 1
        if queries == 1 or queries % 20 == 0:
            print(f"query {queries}", flush=True)
    return queries
