"""Job entry points for tests/integration/test_bounds.py (importable by job processes)."""
import os
import sys


def exit_unreadable(ctx):
    """sys.exit() with a message holding a lone surrogate: a file name that is not UTF-8."""
    name = os.fsdecode(b"input-\xff.csv")
    sys.exit(f"cannot read {name}")


def raise_unreadable(ctx):
    """The same text raised (an exit before Spark started is never restarted)."""
    name = os.fsdecode(b"input-\xff.csv")
    raise OSError(f"cannot read {name}")


def exit_huge(ctx):
    sys.exit("x" * 5_000_000)


def _run_dir(ctx):
    """This attempt's run folder (where the peer reads result.json and error.json): the
    newest of the job's folders under the test's base folder."""
    import glob
    found = [d for d in glob.glob(os.path.join(ctx.args["base"], "**", "jobs", ctx.job_id,
                                               "*-*"), recursive=True) if os.path.isdir(d)]
    return max(found, key=os.path.getmtime)


def leave_linked_error(ctx):
    """error.json -> /dev/zero, and exit 3 without the job runner writing its own."""
    os.symlink("/dev/zero", os.path.join(_run_dir(ctx), "error.json"))
    sys.stdout.flush()
    os._exit(3)


def leave_fifo_result(ctx):
    """result.json a FIFO nobody writes, and exit 0 without the runner writing one."""
    os.mkfifo(os.path.join(_run_dir(ctx), "result.json"))
    sys.stdout.flush()
    os._exit(0)


def not_numbers(ctx):
    """A result with numbers JSON does not have."""
    return {"nan": float("nan"), "inf": [float("inf"), -float("inf")], "ok": 1.5}


def leave_nan_result(ctx):
    """result.json written by the job itself, with NaN and -Infinity in it."""
    with open(os.path.join(_run_dir(ctx), "result.json"), "w") as f:
        f.write('{"result": {"x": NaN, "y": -Infinity}}')
    sys.stdout.flush()
    os._exit(0)
