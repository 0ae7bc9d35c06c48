"""Messages between a peer and the process of one Livy `pyspark` interactive session
(jm/runtime/livyrepl.py): typed, framed as the SQL worker's (jm/runtime/sqlproto.py: a
4-byte big-endian length, then the msgpack of [request id, type name, fields]). The
process answers every request with one Reply carrying the same id."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterator, Optional, Union

from jm.runtime import sqlproto

MAX_FRAME = sqlproto.MAX_FRAME
Reply = sqlproto.Reply   # ok, value (or error): the answer to every request


@dataclass(frozen=True)
class RunCode:
    """Run the Python code of statement `statement` in the session's namespace; the
    reply's value is the fields of a CodeResult (dataclasses.asdict)."""
    statement: int
    code: str


@dataclass(frozen=True)
class Interrupt:
    """Cancel statement `statement` if it runs (or waits to run); the reply's value says
    whether it did."""
    statement: int


@dataclass(frozen=True)
class CodeResult:
    status: str                       # "ok" | "error"
    text: str = ""                    # what the statement printed, and its value's repr
    json: Optional[Union[dict, list, Any]] = None   # %json's value
    table: Optional[dict] = None      # %table: {"headers": [...], "data": [[...]]}
    ename: str = ""
    evalue: str = ""
    traceback: tuple = ()             # lines of the user's code's traceback
    state: tuple = ()                 # the session's state-defining statements it ran

    @classmethod
    def from_value(cls, value: dict) -> "CodeResult":
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in (value or {}).items() if k in known}
        for k in ("traceback", "state"):
            kwargs[k] = tuple(kwargs.get(k) or ())
        return cls(**kwargs)


TYPES = {cls.__name__: cls for cls in (RunCode, Interrupt, Reply)}


def pack(request_id: int, message: Any) -> bytes:
    return sqlproto.pack(request_id, message, TYPES)


def unpack(body: bytes) -> tuple[int, Any]:
    return sqlproto.unpack(body, TYPES)


def read_frame(stream: BinaryIO) -> Optional[bytes]:
    return sqlproto.read_frame(stream)


def requests(stream: BinaryIO) -> Iterator[tuple[int, Any]]:
    return sqlproto.requests(stream, TYPES)
