"""The messages between a peer (jm/runtime/executor.py) and its zygote (jm/runtime/zygote.py).

On the zygote's stdin and stdout: frames of a 4-byte big-endian length and a msgpack body
`[type name, fields]`. Frozen dataclasses, one per message:

peer -> zygote: `Spawn` (fork a job process), `Lease` (until when jobs may run), `Guard`
(other processes to kill with the jobs when the lease runs out).
zygote -> peer: `Ready` (once, at start), `Spawned` (the job process's pid), `Exited` (a job
process ended, or a spawn was refused: no lease), `Error` (a frame the zygote could not
take; it carries on).

Also the environment the peer starts the zygote with (PARENT_ENV, LIMITS_ENV, CGROUP_ENV).
"""
from __future__ import annotations

import dataclasses
import struct
from dataclasses import dataclass
from typing import Optional

import msgpack

from jm.policy.runparams import RunParams

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
MESSAGES = {cls.__name__: cls for cls in TO_ZYGOTE + TO_PEER}


class ProtocolError(ValueError):
    """A frame that is no message of this protocol."""


def _wire(value):
    """A field's wire form: a typed value's own (RunParams.to_wire), else the value."""
    to_wire = getattr(value, "to_wire", None)
    return to_wire() if callable(to_wire) else value


def pack(msg) -> bytes:
    fields = {f.name: _wire(getattr(msg, f.name)) for f in dataclasses.fields(msg)}
    body = msgpack.packb([type(msg).__name__, fields], use_bin_type=True)
    return struct.pack(">I", len(body)) + body


def unpack(body: bytes):
    """The message in one frame's body; ProtocolError if it is none."""
    try:
        name, fields = msgpack.unpackb(body, raw=False)
    except Exception as exc:
        raise ProtocolError(f"not a message frame: {exc}") from None
    cls = MESSAGES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ProtocolError(f"unknown message type {name!r}")
    try:
        if cls is Spawn and isinstance(fields, dict) and "params" in fields:
            fields = dict(fields, params=RunParams.from_wire(fields["params"]))
        return cls(**fields)
    except (TypeError, ValueError) as exc:  # (RunParamsError is a ValueError)
        raise ProtocolError(f"bad fields for {name}: {exc}") from None


def next_frame(buf: bytes) -> tuple[Optional[bytes], bytes]:
    """(the body of the first whole frame of `buf`, what follows it), or (None, buf)."""
    if len(buf) < 4:
        return None, buf
    (n,) = struct.unpack(">I", buf[:4])
    if len(buf) < 4 + n:
        return None, buf
    return buf[4:4 + n], buf[4 + n:]


def latest_lease(buf: bytes) -> float | None:
    """The last Lease among the whole frames of `buf` (pure; None: none there): what the
    zygote will hold once it has read them. A zygote that was stopped looks at it (how far
    the peer renewed the lease meanwhile) before it judges the lease run out."""
    until = None
    body, buf = next_frame(buf)
    while body is not None:
        try:
            name, fields = msgpack.unpackb(body, raw=False)
        except Exception:
            name = None
        if name == "Lease":
            until = fields["until"]
        body, buf = next_frame(buf)
    return until
