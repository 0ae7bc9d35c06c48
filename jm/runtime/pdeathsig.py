"""`python -m jm.runtime.pdeathsig CMD ARGS...`: exec CMD so that it is killed when our parent dies.

$JM_NICE (if set) lowers the priority of CMD. Used instead of subprocess's preexec_fn, which is not safe in a process with threads
(pysyncobj's tick thread): Linux keeps PR_SET_PDEATHSIG across execve. CMD runs with
USER_UMASK (the peer's own umask keeps its files to itself; what CMD writes, users' code,
is not the peer's: uvloop's subprocesses take no umask argument).
"""
import os
import sys

from jm.runtime.confine import USER_UMASK
from jm.runtime.zygote import die_with_parent


def main() -> None:
    if len(sys.argv) < 2:
        print("usage: python -m jm.runtime.pdeathsig CMD [ARGS...]", file=sys.stderr)
        sys.exit(2)
    if not die_with_parent():  # the parent is already gone
        sys.exit(1)
    nice = int(os.environ.pop("JM_NICE", "0") or 0)
    if nice:  # job work (a Spark JVM) yields the CPU to the peer's Raft and heartbeats
        os.nice(nice)
    os.umask(USER_UMASK)
    os.execvp(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
