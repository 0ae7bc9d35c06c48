"""Messages between a peer and its SQL worker process (typed, msgpack on the wire): a
frame is a 4-byte big-endian length and the msgpack of [request id, type name, fields].
The worker answers every request with one Reply carrying the same id."""
from __future__ import annotations

import dataclasses
import struct
import traceback
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Iterator, Optional

import msgpack

MAX_FRAME = 256 * 1024 * 1024


@dataclass(frozen=True)
class OpenSession:
    """Attach to (or create) the Spark Connect session `session` and rebuild its state:
    `properties` set, its `artifacts` added and its `python` given to its UDFs, then the
    state-defining statements in `replay` run in order."""
    session: str
    properties: dict = field(default_factory=dict)
    replay: tuple = ()
    # what the session brings (jm/cluster/sessiondeps.py): files added to its Spark
    # session as artifacts, [kind, local path] each; its UDFs' interpreter (None: ours)
    artifacts: tuple = ()
    python: Optional[str] = None


@dataclass(frozen=True)
class Execute:
    """Run a statement; the reply comes with its first page (or its error)."""
    session: str
    op: str
    statement: str
    config: dict = field(default_factory=dict)
    page_rows: int = 1000


@dataclass(frozen=True)
class Fetch:
    """The next page of an operation's rows."""
    op: str
    page_rows: int = 1000


@dataclass(frozen=True)
class Cancel:
    op: str


@dataclass(frozen=True)
class CloseOperation:
    op: str


@dataclass(frozen=True)
class CloseSession:
    session: str
    release: bool = True  # end it in the Spark server too (not when it moved away)


@dataclass(frozen=True)
class Reply:
    ok: bool
    value: Any = None
    error: Optional[str] = None


TYPES = {cls.__name__: cls for cls in (OpenSession, Execute, Fetch, Cancel, CloseOperation,
                                       CloseSession, Reply)}


def pack(request_id: int, message: Any, types: Optional[dict] = None) -> bytes:
    """A frame of `message`, one of `types` (this module's messages by default)."""
    name = type(message).__name__
    if name not in (TYPES if types is None else types):
        raise TypeError(f"not a SQL worker message: {message!r}")
    fields = {f.name: getattr(message, f.name) for f in dataclasses.fields(message)}
    body = msgpack.packb([request_id, name, fields], use_bin_type=True)
    return struct.pack(">I", len(body)) + body


def unpack(body: bytes, types: Optional[dict] = None) -> tuple[int, Any]:
    request_id, name, fields = msgpack.unpackb(body, raw=False, strict_map_key=False)
    cls = (TYPES if types is None else types).get(name)
    if cls is None or not isinstance(fields, dict):
        raise ValueError(f"unknown SQL worker message {name!r}")
    known = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: tuple(tuple(x) if isinstance(x, list) else x for x in v)
              if k in ("replay", "artifacts") else v for k, v in fields.items() if k in known}
    return request_id, cls(**kwargs)


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    parts, got = [], 0
    while got < n:
        chunk = stream.read(n - got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def read_frame(stream: BinaryIO) -> Optional[bytes]:
    """One frame's body from a blocking stream; None at its end."""
    head = _read_exact(stream, 4)
    if len(head) < 4:
        return None
    (size,) = struct.unpack(">I", head)
    if size > MAX_FRAME:
        raise ValueError(f"frame of {size} bytes")
    body = _read_exact(stream, size)
    return body if len(body) == size else None


def requests(stream: BinaryIO, types: Optional[dict] = None) -> Iterator[tuple[int, Any]]:
    """(request id, message) of each frame read from a child's stdin, to the end of its
    input (the peer closed it, or died); an undecodable frame is reported and skipped."""
    while True:
        try:
            body = read_frame(stream)
        except (OSError, ValueError):
            return
        if body is None:
            return
        try:
            request = unpack(body, types)
        except Exception:
            traceback.print_exc()
            continue
        yield request
