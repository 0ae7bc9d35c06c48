"""A Spark Connect user's script, run by tests/e2e/test_connect_endpoint.py in another
network namespace than the peer: pyspark's own client, as a notebook would use it.

    python connect_client.py SCENARIO URL [TOKEN]

It prints one JSON object: what it saw (results, or the gRPC status and message of a
refusal)."""
import json
import sys


def _status(exc: BaseException) -> dict:
    """The gRPC status pyspark's error carries (or the error's text)."""
    grpc_code = None
    cause = exc
    while cause is not None:
        code = getattr(cause, "code", None)
        if callable(code):
            try:
                grpc_code = code().name
                break
            except Exception:
                pass
        cause = cause.__cause__ or cause.__context__
    return {"error": type(exc).__name__, "code": grpc_code, "message": str(exc)[:2000]}


def session(url: str, token: str = ""):
    from pyspark.sql import SparkSession
    # (pyspark speaks TLS when it sends a token, or when told: the endpoint speaks TLS)
    remote = f"{url}/;token={token}" if token else f"{url}/;use_ssl=true"
    return SparkSession.builder.remote(remote).create()


def work(url: str, token: str) -> dict:
    """DataFrames, SQL, a Python UDF and a streaming query, then the session released."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType
    spark = session(url, token)
    out = {"session_id": spark.session_id}
    df = spark.range(1000).withColumn("k", F.col("id") % 3)
    out["groups"] = sorted((r["k"], r["n"]) for r in
                           df.groupBy("k").agg(F.count("*").alias("n")).collect())
    df.createOrReplaceTempView("t")
    out["sql"] = spark.sql("SELECT sum(id) AS s FROM t WHERE k = 1").collect()[0]["s"]
    square = F.udf(lambda x: x * x, LongType())
    out["udf"] = [r[0] for r in spark.range(4).select(square("id")).collect()]
    q = (spark.readStream.format("rate").option("rowsPerSecond", 50).load()
         .writeStream.format("memory").queryName("ticks").start())
    q.processAllAvailable()
    out["streamed"] = spark.sql("SELECT count(*) AS n FROM ticks").collect()[0]["n"] >= 0
    out["stream_active"] = q.isActive
    q.stop()
    spark.stop()  # (ReleaseSession: the endpoint closes it)
    return out


def refused(url: str, token: str) -> dict:
    try:
        spark = session(url, token)
        spark.sql("SELECT 1").collect()
    except Exception as exc:
        return _status(exc)
    return {"error": None}


def quota(url: str, token: str) -> dict:
    """A first session holds the tenant's only one; a second is refused while it lives."""
    first = session(url, token)
    first.sql("SELECT 1").collect()
    out = {"first": first.session_id, "second": refused(url, token)}
    first.stop()
    return out


def idle(url: str, token: str) -> dict:
    """A session used once; the test lets it go idle (a line on stdin), then it is used
    again."""
    spark = session(url, token)
    spark.sql("SELECT 1").collect()
    print(json.dumps({"session_id": spark.session_id}), flush=True)
    sys.stdin.readline()
    try:
        spark.sql("SELECT 2").collect()
    except Exception as exc:
        return _status(exc)
    return {"error": None}


if __name__ == "__main__":
    scenario, url = sys.argv[1], sys.argv[2]
    token = sys.argv[3] if len(sys.argv) > 3 else ""
    result = {"work": work, "refused": refused, "quota": quota, "idle": idle}[scenario](
        url, token)
    print(json.dumps(result), flush=True)
