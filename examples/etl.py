"""Read JSON lines, clean them with a Python UDF from a helper module, write Parquet.
Plain spark-submit style: the helper module ships with --py-files.

    spark-submit --py-files examples/etl_helpers.py examples/etl.py IN.json OUT_DIR
    jm run examples/etl.py IN.json OUT_DIR --py-files examples/etl_helpers.py --wait

Without IN.json (`-`), it writes a small sample input next to OUT_DIR first.
"""
import json
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

import etl_helpers


def sample_input(path: str) -> None:
    rows = [{"user": f" User{i % 7} ", "country": c, "amount": i * 1.5}
            for i, c in enumerate(["de", "FR", "us ", "De", None, "fr", "US"] * 3)]
    with open(path, "w") as f:
        f.write("\n".join(json.dumps(r) for r in rows) + "\n")


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: etl.py INPUT.json|- OUTPUT_DIR", file=sys.stderr)
        return 2
    src, out = argv[1], argv[2]
    if src == "-":
        src = out.rstrip("/") + "-input.json"
        sample_input(src)
    spark = SparkSession.builder.appName("etl").getOrCreate()
    clean = F.udf(etl_helpers.normalize_country, StringType())
    df = (spark.read.json(src)
          .withColumn("country", clean("country"))
          .withColumn("user", F.trim("user"))
          .groupBy("country").agg(F.count("*").alias("orders"), F.sum("amount").alias("amount")))
    df.write.mode("overwrite").parquet(out)
    for row in df.orderBy("country").collect():
        print(f"{row['country']}\t{row['orders']}\t{row['amount']:.1f}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
