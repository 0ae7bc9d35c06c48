"""One codec for the typed messages between a peer and its child processes (the zygote,
a SQL worker, a Livy REPL): a frame is a 4-byte big-endian length and the msgpack of
`[request id, type name, fields]`. Messages are frozen dataclasses; a field of a typed
value travels in its wire form (`to_wire` / `from_wire`, as RunParams), and a field
declared a tuple comes back a tuple (its list items too). Both ends are of one build (the
peer starts the child), so a frame with an unknown type or field is an error, never a
newer message to skip."""
from __future__ import annotations

import dataclasses
import functools
import struct
import sys
import typing
from typing import Any, BinaryIO, Iterator, Optional

import msgpack

MAX_FRAME = 256 * 1024 * 1024


class ProtocolError(ValueError):
    """A frame that is no message of its protocol."""


def _wire(value: Any) -> Any:
    to_wire = getattr(value, "to_wire", None)
    return to_wire() if callable(to_wire) else value


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


class Codec:
    """The frames of the messages `types` (each a dataclass, known by its class name)."""

    def __init__(self, *types: type, max_frame: int = MAX_FRAME) -> None:
        self.types = {t.__name__: t for t in types}
        self.max_frame = max_frame  # the largest frame the peer reads from the child

    def pack(self, message: Any, request_id: int = 0) -> bytes:
        name = type(message).__name__
        if self.types.get(name) is not type(message):
            raise TypeError(f"not a message of this protocol: {message!r}")
        fields = {f.name: _wire(getattr(message, f.name))
                  for f in dataclasses.fields(message)}
        body = msgpack.packb([request_id, name, fields], use_bin_type=True)
        return struct.pack(">I", len(body)) + body

    def unpack(self, body: bytes) -> tuple[int, Any]:
        """(request id, message) of one frame's body; ProtocolError saying why if none."""
        try:
            request_id, name, fields = msgpack.unpackb(body, raw=False,
                                                       strict_map_key=False)
        except Exception as exc:
            raise ProtocolError(f"not a message frame: {exc}") from None
        cls = self.types.get(name) if isinstance(name, str) else None
        if cls is None:
            raise ProtocolError(f"unknown message type {name!r}")
        if not isinstance(fields, dict) or not isinstance(request_id, int):
            raise ProtocolError(f"bad fields for {name}: not a map")
        try:
            hints = _hints(cls)
            typed = {}
            for key, value in fields.items():
                kind = hints.get(key)
                if hasattr(kind, "from_wire"):
                    value = kind.from_wire(value)
                elif kind is tuple or typing.get_origin(kind) is tuple:
                    value = _tuples(value)
                typed[key] = value
            return request_id, cls(**typed)
        except (TypeError, ValueError) as exc:  # (a from_wire's error is a ValueError)
            raise ProtocolError(f"bad fields for {name}: {exc}") from None

    def requests(self, stream: BinaryIO) -> Iterator[tuple[int, Any]]:
        """(request id, message) of each frame read from a child's stdin, to the end of
        its input (the peer closed it, or died); an undecodable frame is reported on
        stderr and skipped."""
        while True:
            try:
                body = read_frame(stream)
            except (OSError, ValueError):
                return
            if body is None:
                return
            try:
                yield self.unpack(body)
            except ProtocolError as exc:
                print(f"[frames] {exc}", file=sys.stderr, flush=True)


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict:
    return typing.get_type_hints(cls)


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


def next_frame(buf: bytes) -> tuple[Optional[bytes], bytes]:
    """(the body of the first whole frame of `buf`, what follows it), or (None, buf)."""
    if len(buf) < 4:
        return None, buf
    (n,) = struct.unpack(">I", buf[:4])
    if len(buf) < 4 + n:
        return None, buf
    return buf[4:4 + n], buf[4 + n:]
