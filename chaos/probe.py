"""Probe job: appends `job attempt node time` every 100 ms to <dir>/<job>.log until it
is asked to stop. The files show which attempt ran where and when (at most one at a
time, if fencing works)."""
import os
import time


def main(ctx):
    directory = ctx.args["dir"]
    period = float(ctx.args.get("period", 0.1))
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{ctx.job_id}.log")
    with open(path, "a", buffering=1) as f:
        while not ctx.stop_requested.is_set():
            f.write(f"{ctx.job_id} {ctx.attempt} {ctx.node} {time.time():.3f}\n")
            ctx.stop_requested.wait(period)
    return "stopped"


def once(ctx):
    """A job that ends at once (the submission load of a chaos run)."""
    return ctx.attempt
