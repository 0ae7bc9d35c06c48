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
