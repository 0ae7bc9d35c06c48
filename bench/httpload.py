"""A lean HTTP/1.1 keep-alive client for the submission loads (bench/submit.py).

The load's clients share the 2-core machine with the peers they measure: every
millisecond of CPU a client spends on a request is one the peers do not have. aiohttp's
client costs ~0.27 ms of CPU per POST /jobs here (on uvloop; ~0.35 on asyncio's own
loop); this one writes each request as one buffer and reads the answer with a
Content-Length, nothing else (no redirects, cookies, chunked answers or TLS: the peers
answer JSON with a length), at about a quarter of that. One connection per client and
peer, reused; a connection the peer closed is opened again for the next request."""
from __future__ import annotations

import asyncio
import json
from typing import Optional
from urllib.parse import urlsplit


class HttpError(Exception):
    pass


class _Connection(asyncio.Protocol):
    def __init__(self) -> None:
        self.transport: Optional[asyncio.Transport] = None
        self.buf = bytearray()
        self.waiter: Optional[asyncio.Future] = None
        self.closed = False

    def connection_made(self, transport) -> None:
        self.transport = transport

    def connection_lost(self, exc) -> None:
        self.closed = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(HttpError(f"connection closed: {exc}"))

    def data_received(self, data: bytes) -> None:
        self.buf += data
        waiter = self.waiter
        if waiter is None or waiter.done():
            return
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        length, close = None, False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection":
                close = value.strip().lower() == "close"
            elif name == "transfer-encoding":
                waiter.set_exception(HttpError(f"a {value.strip()} answer: not read here"))
                return
        if length is None:
            waiter.set_exception(HttpError("an answer without Content-Length"))
            return
        if len(self.buf) < end + 4 + length:
            return
        body = bytes(self.buf[end + 4:end + 4 + length])
        del self.buf[:end + 4 + length]
        if close:
            self.closed = True
        waiter.set_result((int(lines[0].split(" ", 2)[1]), body))


class Client:
    """One client of the load: `await post_json(url, path, body, headers)` ->
    (status, decoded JSON answer), over its own connection to each peer."""

    def __init__(self) -> None:
        self._conns: dict[str, _Connection] = {}

    async def _conn(self, url: str) -> _Connection:
        conn = self._conns.get(url)
        if conn is None or conn.closed:
            parts = urlsplit(url)
            loop = asyncio.get_running_loop()
            _, conn = await loop.create_connection(_Connection, parts.hostname, parts.port)
            self._conns[url] = conn
        return conn

    async def post_json(self, url: str, path: str, body: dict,
                        headers: dict[str, str]) -> tuple[int, dict]:
        conn = await self._conn(url)
        data = json.dumps(body).encode()
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        conn.waiter = asyncio.get_running_loop().create_future()
        conn.transport.write(
            f"POST {path} HTTP/1.1\r\nHost: {urlsplit(url).netloc}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n{head}\r\n"
            .encode("latin-1") + data)
        try:
            status, raw = await conn.waiter
        finally:
            conn.waiter = None
        return status, json.loads(raw) if raw else {}

    def close(self) -> None:
        for conn in self._conns.values():
            if conn.transport is not None:
                conn.transport.close()
        self._conns.clear()
