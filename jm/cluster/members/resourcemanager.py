"""ResourceManager: active on the Raft leader only. Places waiting jobs on live peers
(pure policy in jm.policy.members.placement), declares peers dead after
`heartbeat.timeout` without a heartbeat, counted from when this peer applied it (a new
leader keeps what it applied as a follower, and gives every peer a grace from its
takeover), moves the streaming jobs of draining peers away and rebalances (pure policy
in jm.policy.members.rebalance)."""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional

from raft import state as S
from raft.commands import (ANYWHERE, Assignment, AssignJobs, DeclarePeerDead, Heartbeat,
                           LeaseRound, Move, MoveJobs, PurgeJobs, RegisterPeer)
from jm.policy.jobs.retention import expired_jobs, purge_batches, track_ended
from raft.state import ClusterState
from raft.node import RaftUnavailable
from jm.cluster.waits import wait_event
from jm.policy.members.placement import PeerLoad, Waiting, place
from jm.policy.members.quota import room, tenant_key, usage
from jm.policy.members.rebalance import JobInfo, PeerInfo, PlannedMove, plan_drain, plan_rebalance

log = logging.getLogger("jm.rm")

MAX_PLACE_BATCH = 2000
PURGE_PER_ROUND = 20000  # ended jobs forgotten per purge round (in byte-bounded commands)


@dataclass(frozen=True)
class RebalanceConfig:
    strategy: str = "on-join"   # none | on-join | continuous
    interval: float = 10.0
    max_moves: int = 2
    threshold: float = 1.0

    @staticmethod
    def from_conf(conf) -> "RebalanceConfig":
        return RebalanceConfig(conf["rebalance.strategy"], conf["rebalance.interval"],
                               conf["rebalance.max-moves-per-round"], conf["rebalance.threshold"])


def load_view(st: ClusterState) -> tuple[list[PeerInfo], list[JobInfo], list[JobInfo]]:
    """Pure: the live peers' loads (jobs counted where they run or are moving to) and the
    jobs a rebalance may move (RUNNING) and a drain may move (any live state)."""
    used: dict[str, int] = {}
    rebalance, drain = [], []
    for node, owned in st.assigned.items():
        for job_id, slots in owned.items():
            job = st.jobs[job_id]
            where = job.move_to or node
            used[where] = used.get(where, 0) + slots
            free = (job.streaming and job.move_to is None and job.stop_trigger is None
                    and not job.cancel_requested and job.status not in S.TERMINAL)
            if free:
                info = JobInfo(job_id, node, slots, job.epoch, tenant=tenant_key(job.tenant))
                drain.append(info)
                if job.status == S.RUNNING:
                    rebalance.append(info)
    peers = [PeerInfo(p.id, p.slots, p.share_weight, used.get(p.id, 0),
                      p.ready and not p.draining, frozenset(p.lacks))
             for p in st.alive_peers()]
    return peers, rebalance, drain


def tenant_room(st: ClusterState) -> dict[str, int]:
    """Pure: the slots each tenant with a slot quota may still take (raft/tenants.py)."""
    quotas = {name: t.slots for name, t in st.tenants.items() if t.slots > 0}
    if not quotas:
        return {}
    return room(quotas, tenant_usage(st))


def tenant_usage(st: ClusterState) -> dict[str, int]:
    """Pure: the slots each tenant's jobs hold (jm/policy/members/quota.py)."""
    return usage((st.jobs[j].tenant, slots) for owned in st.assigned.values()
                 for j, slots in owned.items())


def tenants_by_node(st: ClusterState) -> dict[str, set]:
    """Pure: the tenants (quota keys) each peer runs jobs of."""
    return {node: {tenant_key(st.jobs[j].tenant) for j in owned}
            for node, owned in st.assigned.items()}


def rebalance_round(st: ClusterState, threshold: float, limit: int) -> list[PlannedMove]:
    peers, movable, _ = load_view(st)
    return plan_rebalance(peers, movable, threshold, limit)


def to_command(moves: list[PlannedMove], reason: str, now: float,
               restart: bool = False) -> MoveJobs:
    return MoveJobs(tuple(Move(m.job_id, m.source, m.target, m.epoch, restart) for m in moves),
                    reason, now)


def overdue_jobs(st: ClusterState, nodes: set[str]) -> list[JobInfo]:
    """Pure: the jobs still on `nodes` (peers past their drain deadline) that are not
    moving or ending already: they all leave now."""
    out = []
    for node in sorted(nodes):
        for job_id, slots in st.assigned.get(node, {}).items():
            job = st.jobs[job_id]
            if (job.move_to is None and job.stop_trigger is None
                    and not job.cancel_requested and job.status not in S.TERMINAL):
                out.append(JobInfo(job_id, node, slots, job.epoch))
    return out


def deadline_moves(st: ClusterState, nodes: set[str], mode: str, leader: Optional[str]
                   ) -> list[PlannedMove]:
    """Pure: where the jobs of peers past their drain deadline go: placed like new jobs
    where there is room; the others stop and wait for room anywhere (Move to ANYWHERE),
    so that the deadline holds (Nomad's drain deadline)."""
    jobs = overdue_jobs(st, nodes)
    if not jobs:
        return []
    peers, _, _ = load_view(st)
    peers = [PeerInfo(p.node, p.slots, p.weight, st.slots_used(p.node), p.eligible)
             for p in peers]
    moves = plan_drain(peers, jobs, nodes, len(jobs), mode, leader)
    placed = {m.job_id for m in moves}
    return moves + [PlannedMove(j.job_id, j.node, ANYWHERE, j.epoch) for j in jobs
                    if j.job_id not in placed]


def dead_peers(last_seen: dict[str, float], alive: list[str], now: float,
               timeout: float) -> list[str]:
    """Pure: peers whose last sign of life is older than `timeout`."""
    return sorted(n for n in alive if now - last_seen.get(n, now) > timeout)


def takeover_last_seen(applied: dict[str, float], peers, now: float, timeout: float,
                       grace: float) -> dict[str, float]:
    """Pure: the liveness clocks of a peer that has just become the leader.

    `applied` holds when this peer applied each peer's last heartbeat or registration,
    recorded while it was a follower. Every peer's lease ran out `lease-timeout` after it
    *sent* that heartbeat, which is before anybody applied it, so counting
    `heartbeat.timeout` from this peer's own apply time is as safe as it is on the old
    leader: a dead leader's jobs move `heartbeat.timeout` after its last heartbeat, not
    after the election plus a full timeout. A peer this peer never saw applied (it
    recovered from a snapshot) gets the full timeout from now, and every peer gets at
    least `grace` from now to renew through the new leader, because nobody could commit
    a heartbeat during the election."""
    floor = now - timeout + grace
    return {p: max(applied.get(p, now), floor) for p in peers}


class ResourceManager:
    def __init__(self, raft, heartbeat_timeout: float, write_timeout: float,
                 wall_clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic,
                 expiration: float = 3600.0, capacity: int = 10000,
                 purge_every: float = 10.0, placement: str = "spread",
                 rebalance: RebalanceConfig = RebalanceConfig(), metrics=None,
                 takeover_grace: Optional[float] = None, membership=None) -> None:
        self.raft = raft
        self.membership = membership  # members/membership.py's Membership (None in unit tests)
        self._drain_seen: dict[str, float] = {}  # draining peer -> when this leader saw it
        self._ended_seen: dict[str, float] = {}  # ended job -> when this peer saw it ended
        self.timeout = heartbeat_timeout
        self.grace = heartbeat_timeout if takeover_grace is None else takeover_grace
        self.write_timeout = write_timeout
        self.wall = wall_clock
        self.mono = monotonic
        self.last_seen: dict[str, float] = {}
        self._seen_lock = threading.Lock()
        self.expiration, self.capacity, self.purge_every = expiration, capacity, purge_every
        self.placement = placement
        self.rebalance = rebalance
        self.metrics = metrics
        self._eligible: set[str] = set()
        self._next_round: Optional[float] = None
        self._next_death: Optional[float] = None  # when the next alive peer's timeout ends
        self._last_purge = 0.0
        self.leading = False
        self._wake = raft.subscribe()
        self._task = None
        self._closing = False
        raft.apply_hooks.append(self._on_apply)
        raft.load_hooks.append(self._on_load)

    def _on_apply(self, command, result) -> None:
        # tick thread: remember when this peer applied each sign of life
        if isinstance(command, (Heartbeat, RegisterPeer)) and result.ok:
            with self._seen_lock:
                self.last_seen[command.node] = self.mono()
        elif isinstance(command, LeaseRound) and result.ok:
            now = self.mono()
            with self._seen_lock:
                for hb, r in zip(command.beats, result.value):
                    if r.ok:
                        self.last_seen[hb.node] = now

    def _on_load(self) -> None:
        # tick thread: a snapshot brought heartbeats this peer never applied one by one,
        # so what it recorded may be older than the truth; a takeover must then count
        # from itself (takeover_last_seen gives peers not seen a full timeout)
        with self._seen_lock:
            self.last_seen = {}

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while not self._closing:
            # until a change, the next round, or the moment a peer's timeout runs out
            wait = 0.2 if self._next_death is None else \
                min(0.2, max(0.02, self._next_death - self.mono()))
            await wait_event(self._wake, wait)
            self._wake.clear()
            if self.membership is not None:
                self.membership.persist()
            leader = self.raft.is_leader()
            if leader and not self.leading:
                now = self.mono()
                with self.raft.read() as st, self._seen_lock:
                    self.last_seen = takeover_last_seen(self.last_seen, st.peers, now,
                                                        self.timeout, self.grace)
                    self._eligible = _eligible(st)
                self._next_round = now + self.rebalance.interval \
                    if self.rebalance.strategy == "continuous" else None
                log.info("this peer is the leader now; ResourceManager active")
            self.leading = leader
            if not leader:
                self._next_death = None
                self._drain_seen.clear()  # a drain deadline counts from a takeover
                continue
            try:
                await self._check_liveness()
                await self._place()
                await self._drain()
                await self._drain_deadlines()
                if self.membership is not None:
                    await self.membership.step()
                await self._rebalance()
                await self._purge()
            except RaftUnavailable as exc:
                log.info("ResourceManager write not committed: %s", exc)
            except Exception:
                log.exception("ResourceManager round failed")

    async def _check_liveness(self) -> None:
        with self.raft.read() as st:
            alive = [p.id for p in st.alive_peers()]
            seen = {p.id: (p.last_heartbeat, p.registered_at, p.beats)
                    for p in st.alive_peers()}
        clocks = [self.last_seen[n] for n in alive if n in self.last_seen]
        self._next_death = min(clocks) + self.timeout + 0.001 if clocks else None
        for node in dead_peers(self.last_seen, alive, self.mono(), self.timeout):
            log.warning("peer %s missed heartbeats for %.1f s: declaring it dead", node,
                        self.timeout)
            hb, reg, beats = seen[node]
            res = await self.raft.submit(DeclarePeerDead(node, self.wall(), hb, reg, beats),
                                         self.write_timeout)
            if res.ok and self.metrics is not None:
                self.metrics.failovers.inc()
            if res.ok and res.value:
                log.warning("jobs of %s to move: %s", node, ", ".join(res.value))

    async def _place(self) -> None:
        with self.raft.read() as st:
            peers = [PeerLoad(p.id, p.slots, st.slots_used(p.id), p.ready,
                              frozenset(p.lacks))
                     for p in st.schedulable_peers()]
            free = {p.node: p.slots - p.used for p in peers}
            total_free, most_free = sum(max(0, f) for f in free.values()), max(free.values(), default=0)
            if total_free <= 0 or not st.pending:
                return
            room = tenant_room(st)
            waiting = []
            for job_id in st.pending:  # cheap when every peer is full: we returned above
                job = st.jobs[job_id]
                tenant = tenant_key(job.tenant)
                if job.node is None and job.status not in S.TERMINAL and \
                        job.slots <= min(most_free, room.get(tenant, most_free)):
                    waiting.append(Waiting(job_id, job.slots, job.epoch, tenant))
                    if len(waiting) >= min(total_free, MAX_PLACE_BATCH):
                        break
            hosting = tenants_by_node(st) if self.placement == "by-tenant" else None
        decisions = place(waiting, peers, self.placement, self.raft.leader(), room, hosting)
        if decisions:
            res = await self.raft.submit(AssignJobs(tuple(Assignment(j, n, e)
                                                          for j, n, e in decisions),
                                                    self.wall()), self.write_timeout)
            if res.ok and self.metrics is not None:
                with self.raft.read() as st:
                    for job_id, _ in res.value["assigned"]:
                        job = st.jobs.get(job_id)
                        if job is not None and job.attempts:
                            waited = job.attempts[-1].start - job.timestamps.get(S.CREATED,
                                                                                 job.submitted_at)
                            self.metrics.placement.observe(max(0.0, waited))

    async def _drain(self) -> None:
        """Move the streaming jobs of draining peers away, max-moves-per-round at a time."""
        with self.raft.read() as st:
            draining = {p.id for p in st.alive_peers() if p.draining}
            if not draining:
                return
            budget = self.rebalance.max_moves - st.moves_in_flight()
            peers, _, movable = load_view(st)
            # a target's slots count as held until its own outgoing moves are released
            peers = [PeerInfo(p.node, p.slots, p.weight, st.slots_used(p.node), p.eligible)
                     for p in peers]
        moves = plan_drain(peers, movable, draining, budget, self.placement, self.raft.leader())
        if moves:
            log.info("drain: moving %s", ", ".join(f"{m.job_id} {m.source}->{m.target}"
                                                   for m in moves))
            await self.raft.submit(to_command(moves, "drain", self.wall()), self.write_timeout)

    async def _drain_deadlines(self) -> None:
        """Every job still on a peer whose drain deadline has passed (counted from when this
        leader saw the drain) leaves it now: batch jobs run again from the start elsewhere,
        streaming jobs resume from their checkpoint elsewhere (deadline_moves)."""
        now = self.mono()
        with self.raft.read() as st:
            deadlines = {p.id: p.drain_deadline for p in st.alive_peers()
                         if p.draining and p.drain_deadline is not None}
            for node in list(self._drain_seen):
                if node not in deadlines:
                    del self._drain_seen[node]
            overdue = {n for n, d in deadlines.items()
                       if now - self._drain_seen.setdefault(n, now) >= d}
            if not overdue:
                return
            moves = deadline_moves(st, overdue, self.placement, self.raft.leader())
        if moves:
            log.info("drain deadline passed: restarting %s",
                     ", ".join(f"{m.job_id} {m.source}->{m.target}" for m in moves))
            await self.raft.submit(to_command(moves, "drain-deadline", self.wall(), True),
                                   self.write_timeout)

    async def _rebalance(self) -> None:
        """rebalance.strategy: on-join runs rounds after a peer joins (or is undrained, or
        gets ready) until balanced; continuous runs one every rebalance.interval."""
        cfg = self.rebalance
        if cfg.strategy == "none" or self.placement != "spread":
            return
        now = self.mono()
        with self.raft.read() as st:
            eligible = _eligible(st)
            joined = eligible - self._eligible
            self._eligible = eligible
            if joined and cfg.strategy == "on-join":
                log.info("peer(s) %s joined: rebalancing", ", ".join(sorted(joined)))
                self._next_round = now
            if self._next_round is None or now < self._next_round or st.moves_in_flight():
                return
            moves = rebalance_round(st, cfg.threshold, cfg.max_moves)
        if moves or cfg.strategy == "continuous":
            self._next_round = now + cfg.interval
        else:
            self._next_round = None  # balanced: wait for the next join
        if moves:
            log.info("rebalance: moving %s", ", ".join(f"{m.job_id} {m.source}->{m.target}"
                                                       for m in moves))
            await self.raft.submit(to_command(moves, "rebalance", self.wall()),
                                   self.write_timeout)

    async def _purge(self) -> None:
        """Forget ended jobs past jobstore.expiration-time or jobstore.max-capacity.

        An ended job's age counts from when this peer first saw it ended, on this peer's
        monotonic clock (jm.policy.jobs.retention), never from its `end_time`: that one is
        stamped by the wall clock of the job's owner, another host. A new leader counts
        from its own first look (a job may be kept longer, never forgotten early)."""
        if self.mono() - self._last_purge < self.purge_every:
            return
        now = self._last_purge = self.mono()
        with self.raft.read() as st:
            self._ended_seen = track_ended(st, self._ended_seen, now)
            ids = expired_jobs(self._ended_seen, now, self.expiration, self.capacity,
                               limit=PURGE_PER_ROUND + 1)
        more = len(ids) > PURGE_PER_ROUND
        forgotten = 0
        # several commands, each bounded in bytes, so that one round keeps up with any
        # submission rate Raft accepts (SubmitJobs batches are bounded likewise)
        for chunk in purge_batches(ids[:PURGE_PER_ROUND]):
            res = await self.raft.submit(PurgeJobs(chunk, self.wall()), self.write_timeout)
            forgotten += len(res.value or [])
            for jid in chunk:  # purged, or gone already
                self._ended_seen.pop(jid, None)
        if ids:
            log.info("forgot %d ended jobs (job store expiration/capacity)", forgotten)
        if more:  # more expired than one round takes: purge again at once, not in 10 s
            self._last_purge = now - self.purge_every

    async def close(self) -> None:
        self._closing = True  # (ends the loop even if a cancellation was lost in a round)
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


def _eligible(st: ClusterState) -> set[str]:
    return {p.id for p in st.alive_peers() if p.ready and not p.draining}
