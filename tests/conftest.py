import asyncio
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.helpers import apoll, make_conf  # noqa: E402


class InProcessCluster:
    """N real peers (real pysyncobj over TCP, real aiohttp, real job processes) in one
    asyncio loop: the dask gen_cluster pattern."""

    def __init__(self, base: str, n: int, settings: dict | None = None) -> None:
        from jm.config import load_config, read_masters
        self.conf_dir, self.lines = make_conf(base, n, settings)
        self.conf = load_config(self.conf_dir)
        self.masters = read_masters(os.path.join(self.conf_dir, "masters"))
        self.peers = []

    async def start(self) -> None:
        from jm.peer import Peer
        for m in self.masters:
            p = Peer(self.conf, m, self.masters)
            self.peers.append(p)
        await asyncio.gather(*(p.start() for p in self.peers))
        await apoll(lambda: all(p.registered.is_set() for p in self.peers)
                    and self.peers[0].raft.leader() is not None, 30, what="cluster ready")
        await apoll(self._all_see_all, 30, what="every peer sees every registration")

    def _all_see_all(self) -> bool:
        for p in self.peers:
            with p.raft.read() as st:
                if len(st.alive_peers()) != len(self.peers):
                    return False
        return True

    def url(self, i: int) -> str:
        return self.masters[i].rest_url

    async def stop(self) -> None:
        await asyncio.gather(*(p.stop() for p in self.peers), return_exceptions=True)


@pytest.fixture
async def cluster3(tmp_path):
    c = InProcessCluster(str(tmp_path), 3)
    try:
        await c.start()
        yield c
    finally:
        await c.stop()
