"""Job entry points for tests/integration/test_bounds.py (importable by job processes)."""
import os
import sys


def exit_unreadable(ctx):
    """sys.exit() with a message holding a lone surrogate: a file name that is not UTF-8."""
    name = os.fsdecode(b"input-\xff.csv")
    sys.exit(f"cannot read {name}")


def exit_huge(ctx):
    sys.exit("x" * 5_000_000)
