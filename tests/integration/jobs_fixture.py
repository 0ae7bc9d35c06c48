"""Tiny job entry points used by the integration tests (importable by job processes)."""
import os
import signal
import sys
import time


def quick(ctx):
    return {"job": ctx.job_id, "attempt": ctx.attempt, "node": ctx.node, "args": ctx.args}


def boom(ctx):
    raise RuntimeError("boom from user code")


def exits(ctx):
    sys.exit(3)


def segfault(ctx):
    os.kill(os.getpid(), signal.SIGSEGV)


def wait_for_stop(ctx):
    print("waiting for stop", flush=True)
    while not ctx.stop_requested.wait(0.05):
        pass
    return "stopped"


def sleepy(ctx):
    time.sleep(float(ctx.args.get("seconds", 60)))
    return "slept"


def flaky(ctx):
    """Fails on its first run of each attempt epoch, succeeds after (marker file)."""
    marker = os.path.join(ctx.args["dir"], f"{ctx.job_id}.ran")
    if not os.path.exists(marker):
        open(marker, "w").close()
        raise ValueError("first run fails")
    return "second run ok"


def huge_result(ctx):
    return {"n": 2 ** 70}  # JSON can hold it; the replicated state (msgpack) cannot


def ticker(ctx, last_committed=None):
    """A stateful "streaming" job without Spark, laid out like a Spark query checkpoint:
    batch n writes offsets/n, then its output out/<n> (idempotent: a replay of an
    uncommitted batch overwrites it), then commits/n. It resumes after the last committed
    batch (`last_committed(query dir)`, the savepoint module's by default), so an attempt
    that moves (or resumes from a savepoint) loses nothing and duplicates nothing. Each
    output records the attempt that wrote it."""
    if last_committed is None:
        from jm.cluster.jobs.savepoint import last_committed
    q = os.path.join(ctx.checkpoint_dir, "ticks")
    out = ctx.args["output"]
    for d in (os.path.join(q, "offsets"), os.path.join(q, "commits"), out):
        os.makedirs(d, exist_ok=True)
    n = last_committed(q) + 1
    first = n
    interval = float(ctx.args.get("interval", 0.05))

    def put(path, text):
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.replace(path + ".tmp", path)

    while not ctx.stop_requested.is_set():
        put(os.path.join(q, "offsets", str(n)), str(n))
        put(os.path.join(out, str(n)), f"{ctx.job_id} {ctx.attempt}")
        put(os.path.join(q, "commits", str(n)), str(n))
        n += 1
        ctx.stop_requested.wait(interval)
    return {"first": first, "next": n}


def stubborn(ctx):
    """Ignores stop requests (SIGTERM): the JobMaster has to kill it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(0.05)


def spark_until_stop(ctx):
    """A connect-mode job that keeps using its Spark session until it is asked to stop
    (it fails as soon as its engine is gone); its first row says which engine it has."""
    n = 0
    while not ctx.stop_requested.wait(0.5):
        n += ctx.spark.sql("SELECT 1 AS one").collect()[0].one
        if n == 1:
            print("spark answered", flush=True)
    return n


def open_engine(ctx):
    """Try another engine's Spark Connect URL (args["url"]) with what this job has."""
    from jm.runtime.jobrun import connect_builder
    try:
        spark = connect_builder(ctx.args["url"]).create()
        spark.sql("SELECT 1").collect()
    except Exception as exc:
        return "refused: " + str(exc).splitlines()[0][:200]
    return "opened"
