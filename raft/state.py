"""The replicated cluster truth and the one pure function that changes it.

`ClusterState.apply(command)` is deterministic: no I/O, no clock, no randomness.
It never raises (a raising apply is a poison pill in pysyncobj); bad commands get
an error `Result` instead. Every peer applies the same log and ends in the same state.
The records it holds and the job states are in raft/records.py. This module keeps the
peers' own commands (registration, heartbeats, death, drain); the handlers of the other
commands are in raft/jobs.py, raft/savepoints.py, raft/sessions.py (SQL sessions),
raft/members.py (membership) and raft/artifacts.py.
"""
from __future__ import annotations

import hashlib
from typing import Any, Optional

from raft import artifacts, connect
from raft import commands as c
from raft import jobs
from raft import livy
from raft import pipelines, protocol, tenants, tokens
from raft import members
from raft import savepoints
from raft import sessions as sql
from raft.jobs import each_item, requeue_jobs_of
from raft.jobs import (  # noqa: F401  (re-exported: raft.state is the public view)
    YOUNG_LOSS, MAX_SPARK_APPS, peer_losses)
from raft.records import (  # noqa: F401  (re-exported: raft.state is the public view)
    CREATED, INITIALIZING, RUNNING, RESTARTING, CANCELLING, CANCELED, FAILED, FINISHED,
    TERMINAL, REPORTABLE, ALIVE, DEAD, MAX_FAILURES_KEPT, MAX_SAVEPOINTS_KEPT, STREAMING,
    MAX_PENDING_SAVEPOINTS, MAX_ATTEMPTS_KEPT, MAX_SAVEPOINT_TARGET,
    BATCH, IN_PROGRESS, COMPLETED, Result, PeerRecord, AttemptRecord, SavepointRecord,
    JobRecord, ArtifactRecord, SqlSessionRecord, TokenRecord, PeerLoss, ENDED_FAILURES_KEPT, ENDED_ATTEMPTS_KEPT,
    ConnectSessionRecord,
    ENDED_TRACE_CHARS, compact_ended)


class ClusterState:
    """Peers, jobs, the assignment table (job -> node, epoch) and artifacts."""

    def __init__(self) -> None:
        self.peers: dict[str, PeerRecord] = {}
        # the lowest protocol its registered peers speak (raft/protocol.py): every
        # command is applied as a replica of that protocol would
        self.protocol: int = protocol.BASELINE
        self.jobs: dict[str, JobRecord] = {}
        self.artifacts: dict[str, ArtifactRecord] = {}
        self.request_ids: dict[str, str] = {}
        # assignment index: node -> {job_id: slots}; only jobs that hold a slot
        self.assigned: dict[str, dict[str, int]] = {}
        # slots reserved on the target of a planned move: node -> {job_id: slots}
        self.incoming: dict[str, dict[str, int]] = {}
        # jobs waiting for placement, in submission order
        self.pending: dict[str, None] = {}
        # SQL gateway sessions (raft/sessions.py): handle -> SqlSessionRecord
        self.sessions: dict[str, SqlSessionRecord] = {}
        # Spark Connect sessions of the peers' endpoints (raft/connect.py)
        self.connect: dict[str, ConnectSessionRecord] = {}
        # Livy interactive sessions (raft/livy.py): id -> the SQL session's handle
        self.livy_ids: dict[int, str] = {}
        self.next_livy: int = 0
        # named credentials (raft/tokens.py): name -> TokenRecord; digest -> name
        self.tokens: dict[str, TokenRecord] = {}
        self.token_digests: dict[str, str] = {}
        # tenants' quotas (raft/tenants.py): name -> TenantRecord
        self.tenants: dict[str, tenants.TenantRecord] = {}
        # named pipelines (raft/pipelines.py): name -> PipelineRecord; the jobs whose end
        # starts a pipeline's next version: job id -> pipeline name
        self.pipelines: dict[str, pipelines.PipelineRecord] = {}
        self.upgrading: dict[str, str] = {}
        self._ended_upgrading: list = []  # (job id, time) ended by the command applying
        # membership (raft/members.py): added, not yet registered; tombstones of removed
        self.joining: dict[str, str] = {}
        self.removed: dict[str, float] = {}
        self.removed_dead: set[str] = set()  # removed while not alive (raft/members.py)
        self.joining_readers: set[str] = set()  # joining as non-voting members
        # kept as jobs change, so that no read walks every job: jobs by status, and the
        # ended jobs in the order they ended (retention, jm/policy/jobs/retention.py)
        self.status_counts: dict[str, int] = {}
        self.ended: dict[str, None] = {}
        self.applied: int = 0
        # the cluster's id, made by its first registration (jm/policy/members/identity.py)
        self.cluster_id: Optional[str] = None
        # jobs numbered in submission order (Livy batch ids are integers): number -> id
        self.next_number: int = 1
        self.by_number: dict[int, str] = {}

    def __setstate__(self, data: dict) -> None:
        """A snapshot from an older version lacks the newer tables."""
        self.__dict__.update(data)
        self.__dict__.setdefault("sessions", {})
        self.__dict__.setdefault("connect", {})
        self.__dict__.setdefault("livy_ids", {})
        self.__dict__.setdefault("next_livy", 0)
        self.__dict__.setdefault("tokens", {})
        self.__dict__.setdefault("token_digests", {})
        self.__dict__.setdefault("tenants", {})
        self.__dict__.setdefault("pipelines", {})
        self.__dict__.setdefault("upgrading", {})
        self.__dict__.setdefault("_ended_upgrading", [])
        self.__dict__.setdefault("joining", {})
        self.__dict__.setdefault("removed", {})
        self.__dict__.setdefault("removed_dead", set())
        self.__dict__.setdefault("joining_readers", set())
        if "status_counts" not in self.__dict__:  # a snapshot from before the counts
            self.status_counts, self.ended = {}, {}
            for job in self.jobs.values():
                self._count(job.status, 1)
            for job in sorted((j for j in self.jobs.values() if j.status in TERMINAL),
                              key=lambda j: j.end_time or 0.0):
                self.ended[job.id] = None
        self.__dict__.setdefault("cluster_id", None)
        self.__dict__.setdefault("next_number", 1)
        self.__dict__.setdefault("by_number", {})
        if "protocol" not in self.__dict__:
            self.refresh_protocol()

    def refresh_protocol(self) -> None:
        """After the registered peers changed: the cluster's protocol."""
        self.protocol = protocol.effective(p.protocol for p in self.peers.values())

    # ---- queries (pure, read-only) -------------------------------------------------
    def slots_used(self, node: str) -> int:
        """Slots held by jobs assigned here plus slots reserved by moves coming here."""
        return (sum(self.assigned.get(node, {}).values())
                + sum(self.incoming.get(node, {}).values()))

    def jobs_of(self, node: str) -> list[str]:
        return list(self.assigned.get(node, {}))

    def alive_peers(self) -> list[PeerRecord]:
        return [p for p in self.peers.values() if p.state == ALIVE]

    def schedulable_peers(self) -> list[PeerRecord]:
        """Live peers that take new work (not draining)."""
        return [p for p in self.peers.values() if p.state == ALIVE and not p.draining]

    def moves_in_flight(self) -> int:
        return sum(len(v) for v in self.incoming.values())

    # ---- the one mutation entry point ------------------------------------------------
    def apply(self, command: Any) -> Result:
        try:
            handler = _HANDLERS.get(type(command))
            if handler is None:
                return Result.fail("invalid", f"unknown command {type(command).__name__}")
            shown = protocol.masked(command, self.protocol)  # as older replicas see it
            if shown is None:
                return Result.fail("protocol", protocol.refusal(command, self.protocol))
            result = handler(self, shown)
            while self._ended_upgrading:  # a pipeline's version ended: start the next
                job_id, time = self._ended_upgrading.pop(0)
                pipelines.job_ended(self, job_id, time)
            self.applied += 1
            return result
        except Exception as exc:  # never a poison pill
            self._ended_upgrading.clear()
            return Result.fail("invalid", f"{type(exc).__name__}: {exc}")

    # ---- helpers ---------------------------------------------------------------------
    def _release(self, job: JobRecord) -> None:
        if job.node is not None:
            owned = self.assigned.get(job.node)
            if owned is not None:
                owned.pop(job.id, None)
            job.last_node = job.node
            job.node = None

    def _cancel_move(self, job: JobRecord) -> None:
        if job.move_to is not None:
            self.incoming.get(job.move_to, {}).pop(job.id, None)
            job.move_to = None

    def _assign_to(self, job: JobRecord, node: str, time: float) -> None:
        job.epoch += 1
        job.report_seq = 0
        job.node = node
        self.assigned.setdefault(node, {})[job.id] = job.slots
        self.pending.pop(job.id, None)
        job.attempts.append(AttemptRecord(job.epoch, node, time))
        peer = self.peers.get(node)
        job.attempts[-1].beats_at_start = peer.beats if peer is not None else -1
        if len(job.attempts) > MAX_ATTEMPTS_KEPT + 1:  # bounded: the first and the last K
            del job.attempts[1:len(job.attempts) - MAX_ATTEMPTS_KEPT]

    def _end_attempt(self, job: JobRecord, time: float, reason: str) -> None:
        if job.attempts and job.attempts[-1].end is None:
            job.attempts[-1].end = time
            job.attempts[-1].reason = reason

    def _count(self, status: str, delta: int) -> None:
        n = self.status_counts.get(status, 0) + delta
        if n:
            self.status_counts[status] = n
        else:
            self.status_counts.pop(status, None)

    def _set_status(self, job: JobRecord, status: str, time: float) -> None:
        if status != job.status:
            self._count(job.status, -1)
            self._count(status, 1)
        job.status = status
        job.timestamps[status] = time
        if status in TERMINAL:
            if job.id in self.upgrading:
                self._ended_upgrading.append((job.id, time))
            self.ended[job.id] = None
            job.end_time = time
            self.pending.pop(job.id, None)
            self._cancel_move(job)
            job.stop_trigger = None
            for sp in job.pending_savepoints():  # nobody will take them any more
                sp.status, sp.completed = COMPLETED, time
                sp.failure = f"the job ended {status} before the savepoint was taken"
            compact_ended(job)


def _register_peer(state: ClusterState, cmd: c.RegisterPeer) -> Result:
    if cmd.node in state.removed:
        return Result.fail("removed", f"peer {cmd.node} was removed from the cluster")
    older = protocol.registration_refusal(cmd.protocol, state.protocol)
    if older is not None:
        known = state.peers.get(cmd.node)
        if known is not None and known.state != DEAD:
            # it came back with an older build: its last incarnation (and what it ran) is
            # gone, and the heartbeats of this one must not keep the record alive
            _declare_dead(state, c.DeclarePeerDead(cmd.node, cmd.time))
        return Result.fail("protocol", older)
    if state.cluster_id is None:  # from the command only: the same on every replica
        state.cluster_id = hashlib.sha256(f"{cmd.node}@{cmd.time!r}".encode()).hexdigest()[:16]
    state.joining.pop(cmd.node, None)
    state.joining_readers.discard(cmd.node)
    peer = state.peers.get(cmd.node)
    if peer is None:
        peer = PeerRecord(cmd.node, cmd.host, cmd.rest_port, cmd.raft_port, cmd.pid,
                          cmd.slots, ALIVE, cmd.time, cmd.time)
        state.peers[cmd.node] = peer
        peer.weight, peer.ready = float(cmd.weight), bool(cmd.ready)
    else:
        if peer.state == DEAD:
            # comes back empty: its jobs were moved when it was declared dead
            peer.declared_dead_at = None
        elif peer.pid != cmd.pid:
            # restarted before it was declared dead: its job processes died with it
            requeue_jobs_of(state, cmd.node, cmd.time, "peer-lost", peer)
            connect.drop_sessions_of(state, cmd.node)
        peer.host, peer.rest_port, peer.raft_port = cmd.host, cmd.rest_port, cmd.raft_port
        peer.pid, peer.slots, peer.state = cmd.pid, cmd.slots, ALIVE
        peer.weight, peer.ready = float(cmd.weight), bool(cmd.ready)
        peer.registered_at = peer.last_heartbeat = cmd.time
    peer.protocol = int(cmd.protocol)
    port = cmd.connect_port
    peer.connect_port = port if isinstance(port, int) and 0 < port < 65536 else 0
    state.refresh_protocol()
    peer.beats += 1
    state.assigned.setdefault(cmd.node, {})
    sql.place_orphans(state)
    return Result(True, cmd.node)


MAX_DISK_LOW = 500  # characters of a peer's free-space warning kept
MAX_LACKS = 1000    # tenants a heartbeat may name as lacking their OS user


def _heartbeat(state: ClusterState, cmd: c.Heartbeat) -> Result:
    peer = state.peers.get(cmd.node)
    if peer is None:
        return Result.fail("not-found", f"unknown peer {cmd.node}")
    if peer.state == DEAD:
        return Result.fail("stale", f"peer {cmd.node} was declared dead; it must register again")
    peer.last_heartbeat = max(peer.last_heartbeat, cmd.time)
    peer.beats += 1
    peer.ready = bool(cmd.ready)
    peer.disk_low = cmd.disk_low[:MAX_DISK_LOW] if isinstance(cmd.disk_low, str) else ""
    lacks = cmd.lacks if isinstance(cmd.lacks, (tuple, list)) else ()
    peer.lacks = tuple(t for t in lacks[:MAX_LACKS] if isinstance(t, str))
    return Result(True)


def _lease_round(state: ClusterState, cmd: c.LeaseRound) -> Result:
    return each_item(state, cmd.beats, c.Heartbeat, _heartbeat)


def _declare_dead(state: ClusterState, cmd: c.DeclarePeerDead) -> Result:
    peer = state.peers.get(cmd.node)
    if peer is None:
        return Result.fail("not-found", f"unknown peer {cmd.node}")
    if peer.state == DEAD:
        return Result(True, [])
    if cmd.seen_beats >= 0:
        if peer.beats != cmd.seen_beats:
            return Result.fail("stale", f"peer {cmd.node} was heard from after the decision")
    elif cmd.seen_heartbeat >= 0 and (peer.last_heartbeat != cmd.seen_heartbeat
                                      or peer.registered_at != cmd.seen_registered):
        return Result.fail("stale", f"peer {cmd.node} was heard from after the decision")
    peer.state = DEAD
    peer.declared_dead_at = cmd.time
    sql.move_sessions_of(state, cmd.node, cmd.time)
    connect.drop_sessions_of(state, cmd.node)
    return Result(True, requeue_jobs_of(state, cmd.node, cmd.time, "peer-lost", peer))


def _drain_peer(state: ClusterState, cmd: c.DrainPeer) -> Result:
    peer = state.peers.get(cmd.node)
    if peer is None:
        return Result.fail("not-found", f"unknown peer {cmd.node}")
    if cmd.drain and peer.state != ALIVE:
        return Result.fail("conflict", f"peer {cmd.node} is {peer.state}; only a live peer "
                                       "can be drained")
    if peer.leaving and not cmd.drain:
        return Result.fail("conflict", f"peer {cmd.node} is being removed from the cluster")
    if cmd.by_stop and peer.draining and not peer.drain_by_stop:
        # a peer's own stop neither takes over nor ends an operator's drain
        return Result(True, state.jobs_of(cmd.node))
    peer.draining = bool(cmd.drain)
    peer.drain_deadline = cmd.deadline if cmd.drain else None
    peer.drain_by_stop = bool(cmd.drain and cmd.by_stop)
    if peer.draining:  # moves planned onto it go elsewhere
        for job_id in list(state.incoming.get(cmd.node, {})):
            state._cancel_move(state.jobs[job_id])
    return Result(True, state.jobs_of(cmd.node))


_HANDLERS = {
    c.RegisterPeer: _register_peer,
    c.Heartbeat: _heartbeat,
    c.LeaseRound: _lease_round,
    c.DeclarePeerDead: _declare_dead,
    c.DrainPeer: _drain_peer,
    c.Barrier: lambda st, cmd: Result(True),
    **jobs.HANDLERS,
    **savepoints.HANDLERS,
    **sql.HANDLERS,
    **connect.HANDLERS,
    **livy.HANDLERS,
    **tokens.HANDLERS,
    **tenants.HANDLERS,
    **pipelines.HANDLERS,
    **members.HANDLERS,
    **artifacts.HANDLERS,
}
