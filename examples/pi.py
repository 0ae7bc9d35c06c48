"""Monte Carlo estimate of pi with RDDs, in plain spark-submit style.

    spark-submit examples/pi.py [PARTITIONS]
    jm run examples/pi.py [PARTITIONS] --wait
"""
import random
import sys
from operator import add

from pyspark.sql import SparkSession


def inside(_):
    x, y = random.random() * 2 - 1, random.random() * 2 - 1
    return 1 if x * x + y * y <= 1 else 0


if __name__ == "__main__":
    spark = SparkSession.builder.appName("PythonPi").getOrCreate()
    partitions = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    n = 100000 * partitions
    count = spark.sparkContext.parallelize(range(1, n + 1), partitions).map(inside).reduce(add)
    print(f"Pi is roughly {4.0 * count / n:f}")
    spark.stop()
