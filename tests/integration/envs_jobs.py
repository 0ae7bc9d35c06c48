"""Jobs of tests/integration/test_envs.py: what a job's own environment gives it."""
import sys


def versions(ctx):
    import tabulate
    import six
    # (a job run by a fresh interpreter of its environment: python -m jm.runtime.jobexec)
    return {"tabulate": tabulate.__version__, "six": six.__version__,
            "fresh": sys.argv[0].endswith("jobexec.py"), "python": sys.executable,
            "args": len(ctx.args.get("big", ""))}


def udf_versions(ctx):
    """The version its driver imports and the one its Python UDF imports on Spark."""
    import tabulate
    spark = ctx.spark  # (first: pyspark's udf() then knows it is a Connect session's)
    from pyspark.sql.functions import udf

    @udf("string")
    def version(_):
        import tabulate as in_worker
        return f"{in_worker.__version__}|{in_worker.__file__}"
    row = spark.range(1).select(version("id").alias("v")).collect()[0]
    udf_version, udf_file = row["v"].split("|", 1)
    return {"driver": tabulate.__version__, "udf": udf_version, "udf-file": udf_file}
