"""What the Connect endpoint reads of a Spark Connect request (pure): the methods of
Spark's `SparkConnectService` and, from a request's bytes, the session it is for.

The endpoint passes every request to its engine as the bytes it got; it reads only the
two fields it routes by. In every request of the service (spark/connect/base.proto)
field 1 is `session_id` and field 2 the `UserContext`, whose field 1 is `user_id`;
protobuf writes fields in number order, so both are read from the first bytes of a
request whatever the size of its plan. tests/unit/test_connectwire.py checks the table
and the reader against pyspark's own messages.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

SERVICE = "spark.connect.SparkConnectService"


@dataclass(frozen=True)
class Method:
    name: str
    client_streaming: bool = False
    server_streaming: bool = False

    @property
    def path(self) -> str:
        return f"/{SERVICE}/{self.name}"


METHODS = {m.name: m for m in (
    Method("ExecutePlan", server_streaming=True),
    Method("AnalyzePlan"),
    Method("Config"),
    Method("AddArtifacts", client_streaming=True),
    Method("ArtifactStatus"),
    Method("Interrupt"),
    Method("ReattachExecute", server_streaming=True),
    Method("ReleaseExecute"),
    Method("ReleaseSession"),
    Method("FetchErrorDetails"),
    Method("CloneSession"),
    Method("GetStatus"),
)}

SESSION_ID, USER_CONTEXT, USER_ID = 1, 2, 1
VARINT, I64, LEN, I32 = 0, 1, 2, 5


class NotARequest(ValueError):
    """Bytes that are not a protobuf message (or end inside one of its fields)."""


@dataclass(frozen=True)
class SessionRef:
    """The session a request is for, as the client names it."""
    session_id: str
    user_id: str = ""


def _varint(buf: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(buf) or shift > 63:
            raise NotARequest("a varint runs past the end of the message")
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _fields(buf: bytes, wanted: int):
    """(number, bytes) of the length-delimited fields up to field `wanted` (protobuf
    writes fields in number order: a larger number ends the search)."""
    at = 0
    while at < len(buf):
        key, at = _varint(buf, at)
        number, kind = key >> 3, key & 7
        if number == 0:
            raise NotARequest("field number 0")
        if kind == VARINT:
            _, at = _varint(buf, at)
        elif kind == I64:
            at += 8
        elif kind == I32:
            at += 4
        elif kind == LEN:
            size, at = _varint(buf, at)
            if at + size > len(buf):
                raise NotARequest("a field runs past the end of the message")
            if number <= wanted:
                yield number, buf[at:at + size]
            at += size
        else:
            raise NotARequest(f"wire type {kind} (groups are not in Spark Connect's messages)")
        if number >= wanted:
            return


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise NotARequest(f"{what} is not UTF-8") from None


def session_of(request: bytes) -> Optional[SessionRef]:
    """The session a request names (None: it names none); NotARequest for bytes that are
    not a message."""
    session_id: Optional[str] = None
    user_id = ""
    for number, raw in _fields(request, USER_CONTEXT):
        if number == SESSION_ID:
            session_id = _text(raw, "session_id")
        elif number == USER_CONTEXT:
            for inner, value in _fields(raw, USER_ID):
                if inner == USER_ID:
                    user_id = _text(value, "user_id")
    return SessionRef(session_id, user_id) if session_id else None


def _put_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _put_text(number: int, raw: bytes) -> bytes:
    return _put_varint(number << 3 | LEN) + _put_varint(len(raw)) + raw


def release_request(session_id: str, user_id: str = "") -> bytes:
    """A ReleaseSessionRequest's bytes (what the endpoint sends an engine for a session
    it closes because it is idle)."""
    user = _put_text(USER_ID, user_id.encode("utf-8")) if user_id else b""
    return _put_text(SESSION_ID, session_id.encode("utf-8")) + _put_text(USER_CONTEXT, user)
