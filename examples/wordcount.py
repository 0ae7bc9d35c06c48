"""Batch word count: reads a text file, writes the counts as Parquet, returns the top words.

Submit it through REST or the CLI (it is uploaded as an artifact):
    jm submit examples/wordcount.py --wait
    jm submit examples/wordcount.py --arg input=/path/to/text --arg output=/tmp/wc --arg top=5 --wait
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_INPUT = os.path.join(HERE, "data", "words.txt")


def main(ctx):
    from pyspark.sql import functions as F

    spark = ctx.spark
    source = ctx.args.get("input") or DEFAULT_INPUT
    output = ctx.args.get("output") or os.path.join(os.path.dirname(ctx.checkpoint_dir),
                                                    "wordcount.parquet")
    top_n = int(ctx.args.get("top", 10))
    lines = spark.read.text(source)
    words = (lines.select(F.explode(F.split(F.lower(F.col("value")), r"[^a-z']+")).alias("word"))
                  .where(F.col("word") != ""))
    counts = words.groupBy("word").count()
    counts.write.mode("overwrite").parquet(output)
    written = spark.read.parquet(output)
    top = written.orderBy(F.desc("count"), F.asc("word")).limit(top_n).collect()
    return {"input": source, "output": output,
            "distinct-words": written.count(),
            "total-words": written.agg(F.sum("count")).collect()[0][0],
            "top": [[row["word"], row["count"]] for row in top]}
