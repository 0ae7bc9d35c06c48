"""The messages between a peer (jm/runtime/executor.py) and its zygote (jm/runtime/zygote.py).

On the zygote's stdin and stdout: frames of jm/runtime/frames.py's codec. Frozen
dataclasses, one per message:

peer -> zygote: `Spawn` (fork a job process), `Lease` (until when jobs may run), `Guard`
(other processes to kill with the jobs when the lease runs out).
zygote -> peer: `Ready` (once, at start), `Spawned` (the job process's pid), `Exited` (a job
process ended, or a spawn was refused: no lease), `Error` (a frame the zygote could not
take; it carries on).

Also the environment the peer starts the zygote with (PARENT_ENV, LIMITS_ENV, CGROUP_ENV).
"""
from __future__ import annotations

from dataclasses import dataclass

from jm.policy.jobs.runparams import RunParams
from jm.runtime.frames import Codec, ProtocolError, next_frame

PARENT_ENV = "JM_PARENT_PID"  # set by whoever starts us: the pid we must die with
LIMITS_ENV = "JM_JOB_LIMITS"  # JSON of limits.JobLimits for every job process
CGROUP_ENV = "JM_JOB_CGROUP"  # "1": a cgroup v2 per job where the host has one


# ---- peer -> zygote ----------------------------------------------------------------------
@dataclass(frozen=True)
class Spawn:
    """Fork a job process for `params` (on the wire: RunParams.to_wire())."""
    key: str
    params: RunParams


@dataclass(frozen=True)
class Lease:
    """The peer's lease is valid until this CLOCK_MONOTONIC time (shared by all processes
    of the machine). Past it the zygote kills every job process, even if the peer itself
    is frozen (SIGSTOP) and cannot."""
    until: float


@dataclass(frozen=True)
class Guard:
    """Other processes that run job work for this peer (its Spark Connect JVM, whose
    streaming queries outlive a killed job process): killed too when the lease runs out.
    The peer's supervisor starts a fresh JVM once the peer is back."""
    pids: list


# ---- zygote -> peer ----------------------------------------------------------------------
@dataclass(frozen=True)
class Ready:
    pid: int
    note: str = ""  # a line for the peer's log (e.g. whether jobs get cgroups)


@dataclass(frozen=True)
class Spawned:
    key: str
    pid: int


@dataclass(frozen=True)
class Exited:
    key: str
    pid: int
    code: int      # exit code, or -signal number
    signal: int
    fenced: bool = False  # killed because the peer's lease ran out


@dataclass(frozen=True)
class Error:
    """The zygote could not take a frame (unknown type, wrong fields, not msgpack)."""
    reason: str


TO_ZYGOTE = (Spawn, Lease, Guard)
TO_PEER = (Ready, Spawned, Exited, Error)


CODEC = Codec(*TO_ZYGOTE, *TO_PEER)


def pack(msg) -> bytes:
    return CODEC.pack(msg)


def unpack(body: bytes):
    """The message in one frame's body; ProtocolError if it is none."""
    return CODEC.unpack(body)[1]


def latest_lease(buf: bytes) -> float | None:
    """The last Lease among the whole frames of `buf` (pure; None: none there): what the
    zygote will hold once it has read them. A zygote that was stopped looks at it (how far
    the peer renewed the lease meanwhile) before it judges the lease run out."""
    until = None
    body, buf = next_frame(buf)
    while body is not None:
        try:
            msg = unpack(body)
        except ProtocolError:
            msg = None
        if isinstance(msg, Lease):
            until = msg.until
        body, buf = next_frame(buf)
    return until
