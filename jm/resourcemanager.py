"""ResourceManager: active on the Raft leader only. Places waiting jobs on live peers
(pure policy in jm.placement) and declares peers dead after `heartbeat.timeout`
without a heartbeat, counted from when this leader applied it (or from its takeover)."""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from raft import state as S
from raft.commands import (Assignment, AssignJobs, DeclarePeerDead, Heartbeat, PurgeJobs,
                           RegisterPeer)
from raft.state import expired_jobs
from raft.node import RaftUnavailable
from jm.placement import PeerLoad, Waiting, place

log = logging.getLogger("jm.rm")

MAX_PLACE_BATCH = 2000


def dead_peers(last_seen: dict[str, float], alive: list[str], now: float,
               timeout: float) -> list[str]:
    """Pure: peers whose last sign of life is older than `timeout`."""
    return sorted(n for n in alive if now - last_seen.get(n, now) > timeout)


class ResourceManager:
    def __init__(self, raft, heartbeat_timeout: float, write_timeout: float,
                 wall_clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 expiration: float = 3600.0, capacity: int = 10000,
                 purge_every: float = 10.0, placement: str = "spread") -> None:
        self.raft = raft
        self.timeout = heartbeat_timeout
        self.write_timeout = write_timeout
        self.wall = wall_clock
        self.mono = monotonic
        self.last_seen: dict[str, float] = {}
        self.expiration, self.capacity, self.purge_every = expiration, capacity, purge_every
        self.placement = placement
        self._last_purge = 0.0
        self.leading = False
        self._wake = raft.subscribe()
        self._task = None
        raft.apply_hooks.append(self._on_apply)

    def _on_apply(self, command, result) -> None:
        # tick thread: remember when this peer applied each sign of life
        if isinstance(command, (Heartbeat, RegisterPeer)) and result.ok:
            self.last_seen[command.node] = self.mono()

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), 0.2)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            leader = self.raft.is_leader()
            if leader and not self.leading:
                # restart every liveness timer from the takeover
                now = self.mono()
                with self.raft.read() as st:
                    self.last_seen = {p: now for p in st.peers}
                log.info("this peer is the leader now; ResourceManager active")
            self.leading = leader
            if not leader:
                continue
            try:
                await self._check_liveness()
                await self._place()
                await self._purge()
            except RaftUnavailable as exc:
                log.info("ResourceManager write not committed: %s", exc)
            except Exception:
                log.exception("ResourceManager round failed")

    async def _check_liveness(self) -> None:
        with self.raft.read() as st:
            alive = [p.id for p in st.alive_peers()]
            seen = {p.id: (p.last_heartbeat, p.registered_at) for p in st.alive_peers()}
        for node in dead_peers(self.last_seen, alive, self.mono(), self.timeout):
            log.warning("peer %s missed heartbeats for %.1f s: declaring it dead", node,
                        self.timeout)
            hb, reg = seen[node]
            res = await self.raft.submit(DeclarePeerDead(node, self.wall(), hb, reg),
                                         self.write_timeout)
            if res.ok and res.value:
                log.warning("jobs of %s to move: %s", node, ", ".join(res.value))

    async def _place(self) -> None:
        with self.raft.read() as st:
            peers = [PeerLoad(p.id, p.slots, st.slots_used(p.id)) for p in st.alive_peers()]
            free = {p.node: p.slots - p.used for p in peers}
            total_free, most_free = sum(max(0, f) for f in free.values()), max(free.values(), default=0)
            if total_free <= 0 or not st.pending:
                return
            waiting = []
            for job_id in st.pending:  # cheap when every peer is full: we returned above
                job = st.jobs[job_id]
                if job.node is None and job.status not in S.TERMINAL and job.slots <= most_free:
                    waiting.append(Waiting(job_id, job.slots, job.epoch))
                    if len(waiting) >= min(total_free, MAX_PLACE_BATCH):
                        break
        decisions = place(waiting, peers, self.placement, self.raft.leader())
        if decisions:
            await self.raft.submit(AssignJobs(tuple(Assignment(j, n, e) for j, n, e in decisions),
                                              self.wall()), self.write_timeout)

    async def _purge(self) -> None:
        """Forget ended jobs past jobstore.expiration-time or jobstore.max-capacity."""
        if self.mono() - self._last_purge < self.purge_every:
            return
        self._last_purge = self.mono()
        with self.raft.read() as st:
            ids = expired_jobs(st, self.wall(), self.expiration, self.capacity)
        if ids:
            res = await self.raft.submit(PurgeJobs(tuple(ids), self.wall()), self.write_timeout)
            log.info("forgot %d ended jobs (job store expiration/capacity)", len(res.value or []))

    async def close(self) -> None:
        if self._task:
            self._task.cancel()
