"""An entry job that asks for classic mode: ctx.spark is its own application, so the
SparkContext, RDDs, broadcasts and accumulators work."""


def main(ctx):
    sc = ctx.spark.sparkContext
    factor = sc.broadcast(3)
    seen = sc.accumulator(0)

    def times(x):
        seen.add(1)
        return x * factor.value
    total = sc.parallelize(range(100), 2).map(times).sum()
    return {"total": total, "seen": seen.value, "app": sc.applicationId, "name": sc.appName}
