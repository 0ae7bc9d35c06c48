"""Peer addresses: `host:rest-port:raft-port` (PeerAddress), conf/masters (one per line)
and the choice of the peer this process is (--peer)."""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional

from jm.configvalues import ConfigError


def rest_base_url(scheme: str, host: str, rest_port: int) -> str:
    """scheme://host:port, an IPv6 address in brackets."""
    return f"{scheme}://[{host}]:{rest_port}" if ":" in host else f"{scheme}://{host}:{rest_port}"


@dataclass(frozen=True)
class PeerAddress:
    host: str
    rest_port: int
    raft_port: int

    @property
    def node_id(self) -> str:
        return f"{self.host}:{self.raft_port}"

    @property
    def raft_addr(self) -> str:
        return f"{self.host}:{self.raft_port}"

    @property
    def rest_url(self) -> str:
        return self.url()

    def url(self, scheme: str = "http") -> str:
        """Its REST base URL (https with rest.ssl.enabled)."""
        return rest_base_url(scheme, self.host, self.rest_port)

    def __str__(self) -> str:
        return f"{self.host}:{self.rest_port}:{self.raft_port}"


MAX_PEER_ADDRESS = 300  # characters of host:rest-port:raft-port (a host name: <= 253)
_HOST = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?")


def parse_peer(text: str, where: str = "masters") -> PeerAddress:
    if len(text) > MAX_PEER_ADDRESS:
        raise ConfigError(f"{where}: a peer address is host:rest-port:raft-port, at most "
                          f"{MAX_PEER_ADDRESS} characters (got {len(text)})")
    parts = text.strip().split(":")
    if len(parts) != 3 or not parts[0]:
        raise ConfigError(f"{where}: {text.strip()!r} is not host:rest-port:raft-port")
    if not _HOST.fullmatch(parts[0]):
        raise ConfigError(f"{where}: {parts[0]!r} in {text.strip()!r} is not a host name or "
                          "an IPv4 address")
    try:
        rest, raft = int(parts[1]), int(parts[2])
    except ValueError:
        raise ConfigError(f"{where}: {text.strip()!r} has a port that is not a number")
    for p in (rest, raft):
        if not 0 < p < 65536:
            raise ConfigError(f"{where}: port {p} in {text.strip()!r} is out of range")
    if rest == raft:
        raise ConfigError(f"{where}: {text.strip()!r} uses one port for REST and Raft")
    return PeerAddress(parts[0], rest, raft)


def read_masters(path: str) -> list[PeerAddress]:
    if not os.path.exists(path):
        raise ConfigError(f"masters: file {path} is missing")
    peers = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                peers.append(parse_peer(line, f"masters ({path})"))
    if not peers:
        raise ConfigError(f"masters: {path} lists no peer")
    seen = set()
    for p in peers:
        for port in (p.rest_port, p.raft_port):
            if (p.host, port) in seen:
                raise ConfigError(f"masters: port {p.host}:{port} is used twice")
            seen.add((p.host, port))
    return peers


def choose_self(masters: list[PeerAddress], wanted: Optional[str]) -> PeerAddress:
    """The peer given with --peer (a line of masters, or a member added online that joins
    through them), else the first local line of masters."""
    if wanted:
        me = parse_peer(wanted, "--peer")
        for m in masters:
            if m.host == me.host and m != me and ({m.rest_port, m.raft_port}
                                                   & {me.rest_port, me.raft_port}):
                raise ConfigError(f"--peer {wanted}: shares a port with {m} in conf/masters")
        return me
    for m in masters:
        if m.host in ("127.0.0.1", "localhost"):
            return m
    return masters[0]
