"""Where the other peers answer: REST base URLs from a peer's address, from a node id (the
registered peers of the replicated state) and of every other peer (registered ones, then
conf/masters'). One object handed to what calls other peers, instead of each asking the
peer."""
from __future__ import annotations

from typing import Optional

from jm.config import PeerAddress, rest_base_url
from raft.node import RaftHost


class PeerDirectory:
    def __init__(self, raft: RaftHost, scheme: str, me: PeerAddress,
                 masters: list[PeerAddress]) -> None:
        self.raft, self.scheme, self.me, self.masters = raft, scheme, me, masters

    def url_of(self, host: str, rest_port: int) -> str:
        """The REST base URL of a peer (https with rest.ssl.enabled)."""
        return rest_base_url(self.scheme, host, rest_port)

    def url_of_node(self, node: str) -> Optional[str]:
        with self.raft.read() as st:
            p = st.peers.get(node)
            return self.url_of(p.host, p.rest_port) if p is not None else None

    def other_urls(self) -> list[str]:
        """The REST URLs of the other peers: registered ones, then conf/masters'."""
        with self.raft.read() as st:
            urls = [self.url_of(p.host, p.rest_port) for p in st.peers.values()
                    if p.id != self.me.node_id]
        return urls + [u for m in self.masters if m != self.me
                       and (u := m.url(self.scheme)) not in urls]
