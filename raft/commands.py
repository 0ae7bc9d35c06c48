"""Typed commands that change the replicated ClusterState, and their msgpack codec.

Every change to the cluster's truth is one of these frozen dataclasses. The codec
turns them into bytes for the Raft log and back; nothing else goes over the wire.
Times inside commands are stamped by the sender (wall clock seconds), so `apply`
never reads a clock.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import msgpack


@dataclass(frozen=True)
class RegisterPeer:
    node: str
    host: str
    rest_port: int
    raft_port: int
    pid: int
    slots: int
    time: float


@dataclass(frozen=True)
class Heartbeat:
    node: str
    time: float


@dataclass(frozen=True)
class DeclarePeerDead:
    node: str
    time: float


@dataclass(frozen=True)
class SubmitJob:
    job_id: str
    spec: dict
    time: float
    request_id: str = ""


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


@dataclass(frozen=True)
class ReportStatuses:
    reports: tuple


@dataclass(frozen=True)
class CancelJob:
    job_id: str
    time: float


@dataclass(frozen=True)
class AddArtifact:
    artifact_id: str
    name: str
    size: int
    node: str
    time: float


COMMAND_TYPES = {cls.__name__: cls for cls in (
    RegisterPeer, Heartbeat, DeclarePeerDead, SubmitJob, Assignment, AssignJobs,
    StatusReport, ReportStatuses, CancelJob, AddArtifact)}

_TAG = "__t"


def _to_wire(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {_TAG: type(obj).__name__}
        for f in dataclasses.fields(obj):
            out[f.name] = _to_wire(getattr(obj, f.name))
        return out
    if isinstance(obj, (list, tuple)):
        return [_to_wire(x) for x in obj]
    if isinstance(obj, dict):
        return {k: _to_wire(v) for k, v in obj.items()}
    return obj


def _from_wire(obj: Any) -> Any:
    if isinstance(obj, dict):
        tag = obj.get(_TAG)
        if tag is not None:
            cls = COMMAND_TYPES.get(tag)
            if cls is None:
                raise ValueError(f"unknown command type {tag!r}")
            kwargs = {}
            for f in dataclasses.fields(cls):
                if f.name in obj:
                    value = _from_wire(obj[f.name])
                    if isinstance(value, list) and f.type in ("tuple",):
                        value = tuple(value)
                    kwargs[f.name] = value
            return cls(**kwargs)
        return {k: _from_wire(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_from_wire(x) for x in obj]
    return obj


def encode(command: Any) -> bytes:
    """Encode a command dataclass as msgpack bytes."""
    if type(command).__name__ not in COMMAND_TYPES:
        raise TypeError(f"not a command: {command!r}")
    return msgpack.packb(_to_wire(command), use_bin_type=True)


def decode(blob: bytes) -> Any:
    """Decode msgpack bytes back into the command dataclass."""
    obj = msgpack.unpackb(blob, raw=False, strict_map_key=False)
    command = _from_wire(obj)
    if type(command).__name__ not in COMMAND_TYPES:
        raise ValueError("payload is not a command")
    return command
