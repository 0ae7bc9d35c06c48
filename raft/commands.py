"""Typed commands that change the replicated ClusterState, and their msgpack codec.

Every change to the cluster's truth is one of these frozen dataclasses. The codec
turns them into bytes for the Raft log and back; nothing else goes over the wire.
Times inside commands are stamped by the sender (wall clock seconds), so `apply`
never reads a clock. The sessions' commands are defined in raft/commands_sessions.py,
the tokens', tenants' and pipelines' in raft/commands_admin.py; all are listed here.
"""
from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Any, Optional

import msgpack

from raft import protocol as proto


@dataclass(frozen=True)
class RegisterPeer:
    node: str
    host: str
    rest_port: int
    raft_port: int
    pid: int
    slots: int
    time: float
    weight: float = 0.0   # jobmanager.weight; 0 = proportional to slots
    ready: bool = True    # its Spark is up (moves only go to ready peers)
    # the protocol it speaks (raft/protocol.py); decoded as BASELINE from an older build
    protocol: int = proto.PROTOCOL
    connect_port: int = 0  # its Spark Connect endpoint's port (0: none)


@dataclass(frozen=True)
class Heartbeat:
    node: str
    time: float
    ready: bool = True
    disk_low: str = ""  # the peer's jobmanager.disk.min-free warning ("": none)
    lacks: tuple = ()   # tenants whose os-user this peer's host has no account for


@dataclass(frozen=True)
class LeaseRound:
    """The leader's one entry per round for the heartbeats it received from every peer
    (itself included) since the last one: a peer's lease is renewed when the round holding
    its heartbeat commits (jm/cluster/members/beats.py). One Result per heartbeat."""
    beats: tuple  # of Heartbeat


@dataclass(frozen=True)
class DeclarePeerDead:
    node: str
    time: float
    # what the leader saw when it decided: a heartbeat or registration applied after the
    # decision (e.g. a healed partition) makes the declaration stale
    seen_heartbeat: float = -1.0
    seen_registered: float = -1.0
    # PeerRecord.beats when the leader decided (-1: an entry of an older version, which
    # compares the time stamps above): any heartbeat or registration applied since, however
    # its sender's clock stamped it, makes the declaration stale
    seen_beats: int = -1


@dataclass(frozen=True)
class SubmitJob:
    job_id: str
    spec: dict
    time: float
    request_id: str = ""
    tenant: Optional[str] = None
    submitter: str = ""


@dataclass(frozen=True)
class SubmitJobs:
    """Group commit of concurrent submissions; one Result per job."""
    jobs: tuple


@dataclass(frozen=True)
class Assignment:
    job_id: str
    node: str
    expected_epoch: int


@dataclass(frozen=True)
class AssignJobs:
    assignments: tuple
    time: float


@dataclass(frozen=True)
class StatusReport:
    job_id: str
    epoch: int
    node: str
    status: str
    time: float
    result: Any = None
    failure: Any = None  # {"exception": str, "traceback": str}
    # increasing per reporting process: a batch committed twice (its first commit's answer
    # was lost, then it was retried) applies once; 0 = no sequence (always applied)
    seq: int = 0
    # details of the attempt's Spark application ({"spark-app-id", "spark-ui",
    # "executors", "waiting", "restart"}); a report with info and the job's current status
    # changes only the attempt's details
    info: Any = None
    # a streaming job's last progress (jm/policy/jobs/progress.py, bounded by the reporting
    # peer); a report with progress changes only the job's last progress, never its status
    progress: Any = None


@dataclass(frozen=True)
class ReportStatuses:
    reports: tuple


@dataclass(frozen=True)
class CancelJob:
    job_id: str
    time: float


@dataclass(frozen=True)
class PurgeJobs:
    """Forget ended jobs (Flink's job store expiration); running jobs are never purged."""
    job_ids: tuple
    time: float


@dataclass(frozen=True)
class AddArtifact:
    artifact_id: str
    name: str
    size: int
    node: str
    time: float
    tenants: tuple = ()  # an upload's tenant key (a peer's copy: none)
    submitter: str = ""


@dataclass(frozen=True)
class ForgetArtifacts:
    """The leader's janitor: forget these artifacts if no job names them and they were last
    uploaded before `before` (jobmanager.blob.grace-period ago). With `tenant` (a
    tenant's DELETE): only that tenant's claim goes; the artifact is forgotten once no
    tenant claims it and no job names it."""
    artifact_ids: tuple
    before: float
    time: float
    tenant: str = ""


@dataclass(frozen=True)
class TriggerSavepoint:
    """Ask the job's owner for a savepoint (stop=True: stop-with-savepoint). Idempotent
    per (job, trigger_id)."""
    job_id: str
    trigger_id: str
    target: Any  # target directory, or None for state.savepoints.dir
    stop: bool
    time: float


@dataclass(frozen=True)
class CompleteSavepoint:
    """The owner (fenced by epoch) reports a savepoint's outcome; a successful stop also
    ends the job FINISHED with `result`."""
    job_id: str
    epoch: int
    node: str
    trigger_id: str
    location: Any
    failure: Any
    time: float
    result: Any = None


ANYWHERE = "*"  # Move.target of a drain deadline: any peer with room, later (CREATED meanwhile)


@dataclass(frozen=True)
class Move:
    job_id: str
    source: str
    target: str
    expected_epoch: int
    restart: bool = False  # a batch job too (run again from the start), or to ANYWHERE


@dataclass(frozen=True)
class MoveJobs:
    """Planned moves (rebalance, drain): the owner stops each job at a micro-batch boundary
    and releases it; the target's slot is reserved meanwhile."""
    moves: tuple
    reason: str
    time: float


@dataclass(frozen=True)
class ReleaseJob:
    """The owner stopped a job it was asked to move; it goes to the move's target."""
    job_id: str
    epoch: int
    node: str
    time: float


@dataclass(frozen=True)
class DrainPeer:
    node: str
    drain: bool
    time: float
    # seconds after which batch jobs still running there restart elsewhere (None: they
    # finish where they are); counted by the leader from when it sees the drain
    deadline: Optional[float] = None
    # the peer drains itself because it was told to stop (SIGTERM: jm/cluster/members/stopdrain.py),
    # or (drain False) ends that drain when it starts again; neither changes an operator's
    by_stop: bool = False


@dataclass(frozen=True)
class AdmitPeer:
    """A new member is coming (POST /cluster/peers): "host:rest-port:raft-port"; a Raft
    voter, or a non-voting member (jm/policy/members/voters.py) when the voting core is full."""
    peer: str
    time: float
    voter: bool = True


@dataclass(frozen=True)
class RemovePeer:
    """DELETE /cluster/peers/{node}: a live peer drains and leaves (RetirePeer once it holds
    no job); a dead or never started one is retired at once."""
    node: str
    time: float
    deadline: Optional[float] = None


@dataclass(frozen=True)
class RetirePeer:
    """The peer leaves the state for good (a tombstone keeps it from registering again);
    the leader then takes it out of the Raft membership."""
    node: str
    time: float


@dataclass(frozen=True)
class Barrier:
    """Changes nothing: once a peer has applied it, it has applied every command that was
    committed before it was sent (a read point for "has anyone acknowledged X?")."""


from raft.commands_sessions import (  # noqa: E402 (defined there, listed here)
    AddLivyStatement, AddSqlStatement, CloseConnectSessions, CloseSqlSessions,
    EndLivyStatement, OpenConnectSession, OpenLivySession, OpenSqlSession, SqlOperation,
    StartSqlOperations)
from raft.commands_admin import (  # noqa: E402 (defined there, listed here)
    CreateToken, DeletePipeline, PutPipeline, RevokeToken, SetTenant)

COMMAND_TYPES = {cls.__name__: cls for cls in (
    RegisterPeer, Heartbeat, LeaseRound, DeclarePeerDead, SubmitJob, SubmitJobs, Assignment, AssignJobs,
    StatusReport, ReportStatuses, CancelJob, PurgeJobs, AddArtifact, ForgetArtifacts,
    TriggerSavepoint, CompleteSavepoint, Move, MoveJobs, ReleaseJob, DrainPeer, AdmitPeer,
    RemovePeer, RetirePeer, Barrier, OpenSqlSession, CloseSqlSessions, AddSqlStatement,
    SqlOperation, StartSqlOperations, OpenLivySession, AddLivyStatement, EndLivyStatement,
    CreateToken, RevokeToken, SetTenant, PutPipeline, DeletePipeline, OpenConnectSession,
    CloseConnectSessions)}

_EXT_COMMAND = 1  # msgpack ext type: our dataclasses; user dicts stay plain dicts


@dataclass(frozen=True)
class Packed:
    """An item of a batch command given as its `encode` bytes: packed as those bytes,
    not encoded again (a batcher encodes each item once, when it is queued, to size it;
    a relayed submission arrives encoded). `encode(Batch((Packed(encode(x)),)))` is the
    same bytes as `encode(Batch((x,)))`; it is decoded as the item it holds."""
    blob: bytes


def _ext_body(blob: bytes) -> bytes:
    """The data of the msgpack ext value `blob` (an encoded command), without its header:
    fixext 1-16 (a marker and the type), ext 8/16/32 (a marker, the length, the type)."""
    head = {0xd4: 2, 0xd5: 2, 0xd6: 2, 0xd7: 2, 0xd8: 2, 0xc7: 3, 0xc8: 4, 0xc9: 6}.get(
        blob[0] if blob else -1)
    if head is None or len(blob) < head or blob[head - 1] != _EXT_COMMAND:
        raise TypeError("a Packed item is not an encoded command")
    return blob[head:]


def _default(obj: Any) -> Any:
    if type(obj) is Packed:
        return msgpack.ExtType(_EXT_COMMAND, _ext_body(obj.blob))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        name = type(obj).__name__
        if name not in COMMAND_TYPES:
            raise TypeError(f"cannot encode {name}")
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        return msgpack.ExtType(_EXT_COMMAND, _packb([name, fields]))
    raise TypeError(f"cannot encode {type(obj).__name__}")


class _Packers(threading.local):
    """One msgpack Packer per nesting level, per thread, kept: a command nests (a batch's
    items are ext values packed inside its own packing), and a fresh `msgpack.packb`
    inside another costs ~20 us a level on this machine (each Packer takes a 1 MiB
    buffer: two at once are malloc'd and freed every time), three times what the
    packing itself costs. Same bytes either way."""

    def __init__(self) -> None:
        self.stack: list = []
        self.depth = 0


_packers = _Packers()


def _packb(obj: Any) -> bytes:
    local = _packers
    depth = local.depth
    if depth == len(local.stack):
        local.stack.append(msgpack.Packer(default=_default, use_bin_type=True,
                                          strict_types=False))
    local.depth = depth + 1
    try:
        return local.stack[depth].pack(obj)
    except BaseException:
        del local.stack[depth:]  # (a packer an error stopped halfway is not used again)
        raise
    finally:
        local.depth = depth


def _ext_hook(code: int, data: bytes) -> Any:
    if code != _EXT_COMMAND:
        raise ValueError(f"unknown msgpack extension {code}")
    name, fields = _unpackb(data)
    cls = COMMAND_TYPES.get(name)
    if cls is None:
        raise ValueError(f"unknown command type {name!r}")
    if not isinstance(fields, dict):
        raise ValueError(f"malformed {name}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in fields:
            value = fields[f.name]
            if f.type in ("tuple", "Optional[tuple]") and isinstance(value, list):
                value = tuple(value)
            kwargs[f.name] = value
        elif (name, f.name) in proto.ABSENT:  # sent by an older build
            kwargs[f.name] = proto.ABSENT[(name, f.name)]
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ValueError(f"malformed {name}: {exc}")


def _unpackb(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=_ext_hook)


def encode(command: Any) -> bytes:
    """Encode a command dataclass as msgpack bytes."""
    if type(command).__name__ not in COMMAND_TYPES:
        raise TypeError(f"not a command: {command!r}")
    return _packb(command)


def decode(blob: bytes) -> Any:
    """Decode msgpack bytes back into the command dataclass (ValueError if it is not one)."""
    try:
        command = _unpackb(blob)
    except ValueError:
        raise
    except Exception as exc:
        raise ValueError(f"undecodable command: {exc}")
    if type(command).__name__ not in COMMAND_TYPES:
        raise ValueError("payload is not a command")
    return command
