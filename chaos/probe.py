"""Probe job: appends `job attempt node time` every 100 ms to <dir>/<job>.log until it
is asked to stop. The files show which attempt ran where and when (at most one at a
time, if fencing works)."""
import ctypes
import os
import time

_SYS_CLOCK_GETTIME = {"x86_64": 228, "aarch64": 113}.get(os.uname().machine)


class _Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


def true_time() -> float:
    """The host's real wall clock, asked of the kernel directly: a clock fault
    (libfaketime, preloaded into the peer's processes) must not move the probe's own
    record of when each attempt ran, since the checks compare them across hosts."""
    if _SYS_CLOCK_GETTIME is not None:
        ts = _Timespec()
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(_SYS_CLOCK_GETTIME, 0, ctypes.byref(ts)) == 0:  # CLOCK_REALTIME
            return ts.sec + ts.nsec / 1e9
    return time.time()


def main(ctx):
    directory = ctx.args["dir"]
    period = float(ctx.args.get("period", 0.1))
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{ctx.job_id}.log")
    with open(path, "a", buffering=1) as f:
        while not ctx.stop_requested.is_set():
            f.write(f"{ctx.job_id} {ctx.attempt} {ctx.node} {true_time():.3f}\n")
            ctx.stop_requested.wait(period)
    return "stopped"


def once(ctx):
    """A job that ends at once (the submission load of a chaos run)."""
    return ctx.attempt
