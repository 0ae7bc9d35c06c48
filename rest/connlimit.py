"""Caps on the open connections of a peer's REST server: rest.max-connections in all,
rest.max-connections-per-source from one address, and a share of the total that only
the cluster's peers may use (so that clients holding every slot cannot cut the peers'
heartbeats, artifact and log fetches).

aiohttp has none: every accepted connection gets a request handler, kept open for its
keep-alive time. Here the runner's protocol factory is wrapped: each new connection gets
a gate that, once it knows the source address, either hands the transport to aiohttp's
handler (`transport.set_protocol`) or answers `503 {"errors": [...]}` naming the key
and closes it, without a handler. `admit` decides (pure). (Running out of descriptors is
asyncio's business: its accept loop logs "out of system resource", waits a second and
accepts again; it never closes the listener.)
"""
from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from typing import Any, Callable, Optional

from aiohttp import web

log = logging.getLogger("jm.rest")


def peer_reserve(limit: int) -> int:
    """The part of rest.max-connections only peers may use: a tenth, at least 8 (none
    without a limit, and never all of it)."""
    return 0 if limit <= 0 else min(max(8, limit // 10), limit // 2)


def admit(total: int, from_source: int, is_peer: bool, limit: int,
          per_source: int) -> Optional[str]:
    """None to accept a new connection, else the refusal (naming the key). `total`,
    `from_source`: the connections open now, in all and from its address."""
    if limit > 0 and total >= limit:
        return (f"too many open connections to this peer (limit rest.max-connections, "
                f"{limit}); try again")
    if is_peer:
        return None
    if per_source > 0 and from_source >= per_source:
        return (f"too many open connections from your address (limit "
                f"rest.max-connections-per-source, {per_source}); close some or try again")
    if limit > 0 and total >= limit - peer_reserve(limit):
        return (f"too many open connections to this peer (rest.max-connections, {limit}, "
                f"less the {peer_reserve(limit)} kept for the cluster's peers); try again")
    return None


def _refusal(why: str) -> bytes:
    body = json.dumps({"errors": [why]}).encode()
    return (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
            b"Retry-After: 1\r\nConnection: close\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)


def _source(transport: Any) -> str:
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, (tuple, list)) and peer else ""


class _Gate(asyncio.Protocol):
    """A new connection's first protocol: admitted, it becomes aiohttp's handler's."""

    def __init__(self, limited: "LimitedServer") -> None:
        self.limited = limited

    def connection_made(self, transport: Any) -> None:
        why = self.limited.check(_source(transport))
        if why is not None:
            try:
                transport.write(_refusal(why))
            finally:
                transport.close()
            return
        handler = self.limited.server()
        transport.set_protocol(handler)
        handler.connection_made(transport)

    def data_received(self, data: bytes) -> None:  # (a refused connection's)
        pass


class LimitedServer:
    """Stands in for the runner's web.Server: new connections pass a _Gate; the rest is
    the server's (attributes pass through)."""

    def __init__(self, server: web.Server, limit: int, per_source: int = 0,
                 is_peer: Callable[[str], bool] = lambda address: False) -> None:
        self.server = server
        self.limit, self.per_source, self.is_peer = limit, per_source, is_peer
        self.refused = 0
        self._logged = 0.0

    def __call__(self) -> asyncio.Protocol:
        return _Gate(self)

    def _open(self, source: str) -> tuple[int, int]:
        handlers = list(self.server.connections)
        sources = Counter(_source(h.transport) for h in handlers
                          if getattr(h, "transport", None) is not None)
        return len(handlers), sources[source]

    def check(self, source: str) -> Optional[str]:
        total, mine = self._open(source)
        why = admit(total, mine, self.is_peer(source), self.limit, self.per_source)
        if why is not None:
            self.refused += 1
            now = time.monotonic()
            if now - self._logged > 10:
                self._logged = now
                log.warning("REST connection from %s refused (%d open, %d from it): %s; "
                            "%d refused so far", source, total, mine, why, self.refused)
        return why

    def __getattr__(self, name: str) -> Any:
        return getattr(self.server, name)


def limit_connections(runner: web.AppRunner, limit: int, per_source: int = 0,
                      is_peer: Callable[[str], bool] = lambda address: False) -> None:
    """After runner.setup(), before its sites start; 0: no such cap."""
    if (limit > 0 or per_source > 0) and runner.server is not None:
        runner._server = LimitedServer(runner.server, limit, per_source, is_peer)
