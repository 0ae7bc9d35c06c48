"""Raft frames on a pysyncobj connection (raft/transport.py): `WireConnection` writes
and reads length-prefixed frames through raft/wire.py (the restricted unpickler, the
frame size limits) and drops a connection that sends a refused one, with a log line
(`Throttle`: at most one such line per kind every 10 s)."""
from __future__ import annotations

import logging
import socket
import time
from typing import Any, Optional

from pysyncobj.monotonic import monotonic as monotonic_time
from raft import wire
from raft.door import HookedConnection

log = logging.getLogger("jm.raft.wire")
DEFAULT_MAX_MESSAGE = 256 * 1024 * 1024


class Throttle:
    """One log line per `every` seconds per key, with the count of those left out."""

    def __init__(self, every: float = 10.0) -> None:
        self.every = every
        self._last: dict[str, tuple[float, int]] = {}

    def __call__(self, key: str, level: int, msg: str, *args: Any) -> None:
        now = time.monotonic()
        last, skipped = self._last.get(key, (-1e9, 0))
        if now - last < self.every:
            self._last[key] = (last, skipped + 1)
            return
        self._last[key] = (now, 0)
        if skipped:
            msg += f" ({skipped} more since the last such line)"
        log.log(level, msg, *args)


_say = Throttle()


def _peer_of(sock: Optional[socket.socket]) -> str:
    try:
        host, port = sock.getpeername()[:2]
        return f"{host}:{port}"
    except (OSError, AttributeError):
        return "?"


class WireConnection(HookedConnection):
    """pysyncobj's connection, reading frames through raft/wire.py."""

    def __init__(self, *args: Any, frame_limit: int = DEFAULT_MAX_MESSAGE,
                 member: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.frame_limit = frame_limit
        self.member = member  # it has said which member it is (or we called it)
        self.opened_at = time.monotonic()
        self.peer = _peer_of(self.sock)

    def send(self, message: Any) -> None:
        if self.sendRandKey:
            message = (self.sendRandKey, message)
        data = wire.pack(message)
        if self.encryptor:
            data = self.encryptor.encrypt_at_time(data, int(monotonic_time()))
        self.write(wire.HEADER.pack(len(data)) + data)

    def refuse(self, why: str, level: int = logging.WARNING) -> None:
        _say(f"refuse:{why[:30]}", level, "Raft connection from %s dropped: %s", self.peer, why)
        self.disconnect()

    def read_more(self) -> bool:
        more = super().read_more()
        buf = self.read_buffer
        if more and len(buf) >= 4:  # a frame too long is refused before it is read
            why = wire.frame_error(wire.HEADER.unpack_from(buf)[0], self.frame_limit,
                                   self.member)
            if why:
                self.refuse(why)
                return False
        return more

    def next_message(self) -> Any:
        buf = self.read_buffer
        if len(buf) < 4:
            return None
        length = wire.HEADER.unpack_from(buf)[0]
        why = wire.frame_error(length, self.frame_limit, self.member)
        if why:
            self.refuse(why)
            return None
        if len(buf) - 4 < length:
            return None
        data = buf[4:4 + length]
        try:
            if self.encryptor:
                stamp = self.encryptor.extract_timestamp(data)
                if stamp < self.recvLastTimestamp:
                    raise wire.WireError("an encrypted frame older than the last one")
                self.recvLastTimestamp = stamp
                data = self.encryptor.decrypt(data)
            message = wire.unpack(data, self.frame_limit)
            if self.recvRandKey:
                key, message = message
                if key != self.recvRandKey:
                    raise wire.WireError("a frame with the wrong session key")
        except wire.WireError as exc:
            self.refuse(str(exc))
            return None
        except Exception as exc:  # a bad token (wrong raft.password), a bad tuple
            self.refuse(f"{type(exc).__name__}: {exc}"[:200] or "an unreadable frame")
            return None
        self.read_buffer = buf[4 + length:]
        return message
