"""rest.max-connections: a cap on the open connections of a peer's REST server.

aiohttp has none: every accepted connection gets a request handler, kept open for its
keep-alive time. Here the runner's protocol factory is wrapped: past the cap a new
connection gets `503 {"errors": [...]}` naming the key and is closed, without a
handler. (Running out of descriptors is asyncio's business: its accept loop logs
"out of system resource", waits a second and accepts again; it never closes the
listener.)
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from aiohttp import web

log = logging.getLogger("jm.rest")


def _refusal(limit: int) -> bytes:
    body = json.dumps({"errors": [f"too many open connections to this peer (limit "
                                  f"rest.max-connections, {limit}); try again"]}).encode()
    return (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            b"Retry-After: 1\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)


class _Refuse(asyncio.Protocol):
    def __init__(self, answer: bytes) -> None:
        self.answer = answer

    def connection_made(self, transport: Any) -> None:
        try:
            transport.write(self.answer)
        finally:
            transport.close()

    def data_received(self, data: bytes) -> None:
        pass


class LimitedServer:
    """Stands in for the runner's web.Server: a connection past `limit` is refused; the
    rest is the server's (attributes pass through)."""

    def __init__(self, server: web.Server, limit: int) -> None:
        self._server = server
        self.limit = limit
        self.refused = 0
        self._answer = _refusal(limit)
        self._logged = 0.0

    def __call__(self) -> asyncio.Protocol:
        if len(self._server.connections) >= self.limit:
            self.refused += 1
            now = time.monotonic()
            if now - self._logged > 10:
                self._logged = now
                log.warning("REST connection refused: %d open (rest.max-connections); %d "
                            "refused so far", len(self._server.connections), self.refused)
            return _Refuse(self._answer)
        return self._server()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)


def limit_connections(runner: web.AppRunner, limit: int) -> None:
    """After runner.setup(), before its sites start; limit 0: no cap."""
    if limit > 0 and runner.server is not None:
        runner._server = LimitedServer(runner.server, limit)
