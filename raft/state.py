"""The replicated cluster truth and the one pure function that changes it.

`ClusterState.apply(command)` is deterministic: no I/O, no clock, no randomness.
It never raises (a raising apply is a poison pill in pysyncobj); bad commands get
an error `Result` instead. Every peer applies the same log and ends in the same state.
The records it holds and the job states are in raft/records.py.
"""
from __future__ import annotations

import hashlib
from typing import Any, Optional

from raft import artifacts
from raft import commands as c
from raft import members
from raft import sessions as sql
from raft.records import (  # noqa: F401  (re-exported: raft.state is the public view)
    CREATED, INITIALIZING, RUNNING, RESTARTING, CANCELLING, CANCELED, FAILED, FINISHED,
    TERMINAL, REPORTABLE, ALIVE, DEAD, MAX_FAILURES_KEPT, MAX_SAVEPOINTS_KEPT, STREAMING,
    MAX_PENDING_SAVEPOINTS, MAX_ATTEMPTS_KEPT, MAX_SAVEPOINT_TARGET,
    BATCH, IN_PROGRESS, COMPLETED, Result, PeerRecord, AttemptRecord, SavepointRecord,
    JobRecord, ArtifactRecord, SqlSessionRecord, ENDED_FAILURES_KEPT, ENDED_ATTEMPTS_KEPT,
    ENDED_TRACE_CHARS, compact_ended)


class ClusterState:
    """Peers, jobs, the assignment table (job -> node, epoch) and artifacts."""

    def __init__(self) -> None:
        self.peers: dict[str, PeerRecord] = {}
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
        # membership (raft/members.py): added, not yet registered; tombstones of removed
        self.joining: dict[str, str] = {}
        self.removed: dict[str, float] = {}
        self.removed_dead: set[str] = set()  # removed while not alive (raft/members.py)
        self.joining_readers: set[str] = set()  # joining as non-voting members
        # kept as jobs change, so that no read walks every job: jobs by status, and the
        # ended jobs in the order they ended (retention, jm/policy/retention.py)
        self.status_counts: dict[str, int] = {}
        self.ended: dict[str, None] = {}
        self.applied: int = 0
        # the cluster's id, made by its first registration (jm/policy/identity.py)
        self.cluster_id: Optional[str] = None
        # jobs numbered in submission order (Livy batch ids are integers): number -> id
        self.next_number: int = 1
        self.by_number: dict[int, str] = {}

    def __setstate__(self, data: dict) -> None:
        """A snapshot from an older version lacks the newer tables."""
        self.__dict__.update(data)
        self.__dict__.setdefault("sessions", {})
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
            result = handler(self, command)
            self.applied += 1
            return result
        except Exception as exc:  # never a poison pill
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
            _requeue_jobs_of(state, cmd.node, cmd.time, "peer-lost", peer)
        peer.host, peer.rest_port, peer.raft_port = cmd.host, cmd.rest_port, cmd.raft_port
        peer.pid, peer.slots, peer.state = cmd.pid, cmd.slots, ALIVE
        peer.weight, peer.ready = float(cmd.weight), bool(cmd.ready)
        peer.registered_at = peer.last_heartbeat = cmd.time
    peer.beats += 1
    state.assigned.setdefault(cmd.node, {})
    sql.place_orphans(state)
    return Result(True, cmd.node)


MAX_DISK_LOW = 500  # characters of a peer's free-space warning kept


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
    return Result(True)


def _lease_round(state: ClusterState, cmd: c.LeaseRound) -> Result:
    return _each(state, cmd.beats, c.Heartbeat, _heartbeat)


# A job whose attempts end with their peer's loss right after they started, again and
# again (on one peer restarted by its supervisor each time, or on one peer after another),
# is taken for what kills them (it exhausts the host's memory,
# kills the peer user's processes): it fails instead of taking the next peer down. Fixed
# bounds of the replicated state (every replica decides the same from the same entries).
# A chaos of host losses does not look like that: a peer killed while it runs a job that
# has run for a while, or that was placed on it after it died (no heartbeat of it since),
# does not count.
POISON_ATTEMPTS = 3   # the last so many attempts ended with their peer's loss, each ...
POISON_YOUNG = 5.0    # s ... with its peer heard from for less than this after it started


def kills_its_peers(attempts: list) -> bool:
    """Pure: whether these attempts (oldest first) show a job that takes its peers down."""
    last = attempts[-POISON_ATTEMPTS:]
    return len(last) == POISON_ATTEMPTS and all(
        a.reason == "peer-lost" and a.peer_heard is not None and a.peer_heard < POISON_YOUNG
        for a in last)


def _requeue_jobs_of(state: ClusterState, node: str, time: float, reason: str,
                     lost: Optional[PeerRecord] = None) -> list[str]:
    """`lost`: the peer lost (its last heartbeat and beat count as they were then)."""
    moved = []
    for job_id in list(state.incoming.get(node, {})):  # moves coming here go elsewhere
        state._cancel_move(state.jobs[job_id])
    for job_id in list(state.assigned.get(node, {})):
        job = state.jobs[job_id]
        state._cancel_move(job)
        attempt = job.attempts[-1] if job.attempts else None
        if (lost is not None and attempt is not None and attempt.end is None
                and (attempt.reported or lost.beats > attempt.beats_at_start >= 0)):
            # it ran there (a report of it, or a heartbeat of its peer since it was placed)
            attempt.peer_heard = max(lost.last_heartbeat - attempt.start, 0.0)
        state._end_attempt(job, time, reason)
        state._release(job)
        if job.cancel_requested:
            state._set_status(job, CANCELED, time)
        elif reason == "peer-lost" and kills_its_peers(job.attempts):
            job.failure_count += 1
            job.failures.append({
                "exception": f"its last {POISON_ATTEMPTS} attempts each ended with the loss "
                             f"of the peer running it within {POISON_YOUNG:g} s of starting "
                             f"({', '.join(a.node for a in job.attempts[-POISON_ATTEMPTS:])}):"
                             " the job is taken for what kills its peers (memory, signals) "
                             "and is not placed again",
                "reason": "peer-lost", "final": True, "attempt": job.epoch, "node": node,
                "time": time})
            del job.failures[:-MAX_FAILURES_KEPT]
            state._set_status(job, FAILED, time)
        else:
            state._set_status(job, CREATED, time)
            state.pending[job.id] = None
            moved.append(job_id)
    return moved


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
    return Result(True, _requeue_jobs_of(state, cmd.node, cmd.time, "peer-lost", peer))


def _submit(state: ClusterState, cmd: c.SubmitJob) -> Result:
    if cmd.request_id and cmd.request_id in state.request_ids:
        # an idempotent retry of an acknowledged (or unknown-outcome) submission
        return Result(True, {"jobid": state.request_ids[cmd.request_id], "duplicate": True})
    if cmd.job_id in state.jobs:
        return Result.fail("exists", f"job {cmd.job_id} already exists")
    gone = artifacts.unknown(state, cmd.spec)
    if gone:  # (forgotten by the janitor since the peer checked)
        return Result.fail("invalid", "; ".join(
            f"unknown artifact artifact:{a}; upload it with POST /artifacts" for a in gone))
    job = JobRecord(cmd.job_id, str(cmd.spec.get("name") or cmd.job_id), dict(cmd.spec),
                    cmd.time, cmd.request_id)
    job.timestamps[CREATED] = cmd.time
    state.jobs[job.id] = job
    state._count(job.status, 1)
    state.pending[job.id] = None
    job.number, state.next_number = state.next_number, state.next_number + 1
    state.by_number[job.number] = job.id
    if cmd.request_id:
        state.request_ids[cmd.request_id] = job.id
    return Result(True, {"jobid": job.id, "duplicate": False})


def _submit_many(state: ClusterState, cmd: c.SubmitJobs) -> Result:
    return _each(state, cmd.jobs, c.SubmitJob, _submit)


def _assign(state: ClusterState, cmd: c.AssignJobs) -> Result:
    done, refused = [], []
    for a in cmd.assignments:
        job = state.jobs.get(a.job_id)
        peer = state.peers.get(a.node)
        if (job is None or peer is None or peer.state != ALIVE or peer.draining
                or job.status in TERMINAL
                or job.node is not None or job.epoch != a.expected_epoch
                or job.cancel_requested
                or state.slots_used(a.node) + job.slots > peer.slots):
            refused.append(a.job_id)
            continue
        state._assign_to(job, a.node, cmd.time)
        done.append((a.job_id, job.epoch))
    return Result(True, {"assigned": done, "refused": refused})


def _report_one(state: ClusterState, r: c.StatusReport) -> Result:
    job = state.jobs.get(r.job_id)
    if job is None:
        return Result.fail("not-found", f"unknown job {r.job_id}")
    if job.node is None or r.epoch != job.epoch or r.node != job.node:
        return Result.fail("stale", f"stale report for {r.job_id}: epoch {r.epoch} on {r.node}, "
                                    f"owner is epoch {job.epoch} on {job.node}")
    if job.status in TERMINAL:
        return Result.fail("stale", f"job {r.job_id} already ended {job.status}")
    if r.status not in REPORTABLE:
        return Result.fail("invalid", f"status {r.status} cannot be reported")
    if r.failure is not None and not isinstance(r.failure, dict):
        return Result.fail("invalid", "a failure must be a mapping")
    if r.seq:
        if r.seq <= job.report_seq:
            return Result(True, "duplicate")  # applied already (a retried batch)
        job.report_seq = r.seq
    if job.attempts:
        job.attempts[-1].reported = True  # it ran on its peer (kills_its_peers)
    if r.info is not None:
        _attempt_info(job, r)
        if r.status == job.status and r.failure is None:
            return Result(True)
    if r.failure is not None:
        entry = dict(r.failure)
        job.failure_count += 1
        entry.update({"attempt": r.epoch, "node": r.node, "time": r.time})
        job.failures.append(entry)
        del job.failures[:-MAX_FAILURES_KEPT]
    if r.status in TERMINAL:
        if r.status == FINISHED:
            job.result = r.result
        reason = {FINISHED: "finished", FAILED: "failed", CANCELED: "cancelled"}[r.status]
        state._end_attempt(job, r.time, reason)
        state._release(job)
        state._set_status(job, r.status, r.time)
        return Result(True)
    if job.status == CANCELLING:
        return Result(True)  # keep CANCELLING until the owner confirms the end
    if r.status == RESTARTING:
        job.restarts += 1
    state._set_status(job, r.status, r.time)
    return Result(True)


MAX_SPARK_APPS = 10  # per attempt (one per restart in place)


def _attempt_info(job: JobRecord, r: c.StatusReport) -> None:
    if not isinstance(r.info, dict):
        raise TypeError("a report's info must be a mapping")
    attempt = job.attempts[-1] if job.attempts else None
    if attempt is None or attempt.epoch != r.epoch:
        return
    apps = [a for a in (attempt.spark or []) if a.get("restart") != r.info.get("restart")]
    info = dict(r.info)
    prev = next((a for a in attempt.spark or [] if a.get("restart") == info.get("restart")
                 and a.get("spark-app-id") == info.get("spark-app-id")), None) or {}
    if info.get("waiting"):  # since when it says so
        same = prev.get("waiting") == info["waiting"]
        info["waiting-since"] = prev.get("waiting-since", r.time) if same else r.time
    elif prev.get("waiting"):  # it waited until now: the exception history keeps that
        info["waited"] = {"note": prev["waiting"], "since": prev.get("waiting-since"),
                          "until": r.time}
    elif prev.get("waited"):
        info["waited"] = prev["waited"]
    attempt.spark = (apps + [info])[-MAX_SPARK_APPS:]


def _each(state: ClusterState, items: Any, kind: type, handler) -> Result:
    """Apply a group-committed batch: one Result per item; a bad item loses no other."""
    out = []
    for item in items:
        try:
            if not isinstance(item, kind):
                raise TypeError(f"not a {kind.__name__}")
            out.append(handler(state, item))
        except Exception as exc:
            out.append(Result.fail("invalid", f"{type(exc).__name__}: {exc}"))
    return Result(True, out)


def _report(state: ClusterState, cmd: c.ReportStatuses) -> Result:
    return _each(state, cmd.reports, c.StatusReport, _report_one)


def _cancel(state: ClusterState, cmd: c.CancelJob) -> Result:
    job = state.jobs.get(cmd.job_id)
    if job is None:
        return Result.fail("not-found", f"unknown job {cmd.job_id}")
    if job.status in TERMINAL:
        return Result.fail("conflict", f"job {cmd.job_id} already ended {job.status}")
    job.cancel_requested = True
    state._cancel_move(job)
    if job.node is None:
        state._set_status(job, CANCELED, cmd.time)
    else:
        state._set_status(job, CANCELLING, cmd.time)
    return Result(True, job.status)


def _purge(state: ClusterState, cmd: c.PurgeJobs) -> Result:
    purged = []
    for job_id in cmd.job_ids:
        job = state.jobs.get(job_id)
        if job is None or job.status not in TERMINAL or job.node is not None:
            continue
        del state.jobs[job_id]
        state._count(job.status, -1)
        state.ended.pop(job_id, None)
        state.pending.pop(job_id, None)
        state.by_number.pop(job.number, None)
        if job.request_id and state.request_ids.get(job.request_id) == job_id:
            del state.request_ids[job.request_id]
        purged.append(job_id)
    return Result(True, purged)


def _trigger_savepoint(state: ClusterState, cmd: c.TriggerSavepoint) -> Result:
    job = state.jobs.get(cmd.job_id)
    if job is None:
        return Result.fail("not-found", f"unknown job {cmd.job_id}")
    known = job.savepoints.get(cmd.trigger_id)
    if known is not None:  # a retry of the same request
        if known.stop != bool(cmd.stop):
            return Result.fail("conflict", f"trigger id {cmd.trigger_id} was already used for "
                                           f"a {'stop' if known.stop else 'savepoint'} request")
        return Result(True, {"request-id": known.id, "duplicate": True})
    what = "stop" if cmd.stop else "take a savepoint of"
    if job.status in TERMINAL:
        return Result.fail("conflict", f"cannot {what} job {cmd.job_id}: it already ended "
                                       f"{job.status}")
    if not job.streaming:
        return Result.fail("conflict", f"cannot {what} job {cmd.job_id}: savepoints are for "
                                       "streaming jobs (\"job-type\": \"streaming\"); "
                                       "cancel a batch job instead")
    if job.cancel_requested:
        return Result.fail("conflict", f"job {cmd.job_id} is being cancelled")
    if job.stop_trigger is not None:
        return Result.fail("conflict", f"job {cmd.job_id} is already stopping "
                                       f"(request {job.stop_trigger})")
    if cmd.stop and job.move_to is not None:
        return Result.fail("conflict", f"job {cmd.job_id} is moving to {job.move_to}; "
                                       "retry when it runs there")
    if not isinstance(cmd.trigger_id, str) or not 0 < len(cmd.trigger_id) <= 128:
        return Result.fail("invalid", "a savepoint request id must be 1-128 characters")
    if cmd.target is not None and (not isinstance(cmd.target, str)
                                   or len(cmd.target) > MAX_SAVEPOINT_TARGET):
        return Result.fail("invalid", f"a savepoint target directory must be a path of at "
                                      f"most {MAX_SAVEPOINT_TARGET} characters")
    if len(job.pending_savepoints()) >= MAX_PENDING_SAVEPOINTS:
        return Result.fail("conflict", f"job {cmd.job_id} already has "
                                       f"{MAX_PENDING_SAVEPOINTS} savepoint requests in "
                                       "progress (the most it keeps); retry when one has "
                                       "completed")
    job.savepoints[cmd.trigger_id] = SavepointRecord(cmd.trigger_id, bool(cmd.stop),
                                                     cmd.target, cmd.time)
    if cmd.stop:
        job.stop_trigger = cmd.trigger_id
    while len(job.savepoints) > MAX_SAVEPOINTS_KEPT:
        oldest = next((k for k, v in job.savepoints.items() if v.status == COMPLETED), None)
        if oldest is None:
            break
        del job.savepoints[oldest]
    return Result(True, {"request-id": cmd.trigger_id, "duplicate": False})


def _owner_check(job: Optional[JobRecord], job_id: str, epoch: int, node: str) -> Optional[Result]:
    if job is None:
        return Result.fail("not-found", f"unknown job {job_id}")
    if job.node is None or epoch != job.epoch or node != job.node:
        return Result.fail("stale", f"stale request for {job_id}: epoch {epoch} on {node}, "
                                    f"owner is epoch {job.epoch} on {job.node}")
    return None


def _complete_savepoint(state: ClusterState, cmd: c.CompleteSavepoint) -> Result:
    job = state.jobs.get(cmd.job_id)
    bad = _owner_check(job, cmd.job_id, cmd.epoch, cmd.node)
    if bad is not None:
        return bad
    sp = job.savepoints.get(cmd.trigger_id)
    if sp is None or sp.status != IN_PROGRESS:
        return Result.fail("conflict", f"no savepoint request {cmd.trigger_id} in progress")
    sp.status, sp.completed = COMPLETED, cmd.time
    if cmd.failure is not None:
        sp.failure = str(cmd.failure)
        if job.stop_trigger == sp.id:
            job.stop_trigger = None  # the job keeps running (Flink: stop failed)
        return Result(True)
    sp.location = str(cmd.location)
    job.savepoint_location = sp.location
    if sp.stop and job.stop_trigger == sp.id:
        job.result = cmd.result
        state._end_attempt(job, cmd.time, "stopped")
        state._release(job)
        state._set_status(job, FINISHED, cmd.time)
    return Result(True)


def _move_one(state: ClusterState, m: c.Move) -> Result:
    job = state.jobs.get(m.job_id)
    target = state.peers.get(m.target)
    why = None
    if job is None:
        why = "unknown job"
    elif job.node != m.source or job.epoch != m.expected_epoch:
        why = "it is not (any more) where the plan saw it"
    elif job.status in TERMINAL or job.cancel_requested or job.stop_trigger is not None:
        why = "it is ending"
    elif not job.streaming and not m.restart:
        why = "only streaming jobs move; a batch job finishes where it started"
    elif job.move_to is not None:
        why = f"it is already moving to {job.move_to}"
    elif m.target == c.ANYWHERE and m.restart:
        pass  # a drain deadline: it stops and waits (CREATED) for a peer with room
    elif target is None or target.state != ALIVE or target.draining:
        why = f"peer {m.target} does not take work"
    elif m.target == m.source:
        why = "source and target are the same peer"
    elif state.slots_used(m.target) + job.slots > target.slots:
        why = f"peer {m.target} has no free slot for it"
    if why is not None:
        return Result.fail("conflict", f"cannot move {m.job_id}: {why}")
    job.move_to = m.target
    if m.target != c.ANYWHERE:
        state.incoming.setdefault(m.target, {})[job.id] = job.slots
    return Result(True, [m.job_id, m.source, m.target])


def _move_jobs(state: ClusterState, cmd: c.MoveJobs) -> Result:
    return _each(state, cmd.moves, c.Move, _move_one)


def _release_job(state: ClusterState, cmd: c.ReleaseJob) -> Result:
    job = state.jobs.get(cmd.job_id)
    bad = _owner_check(job, cmd.job_id, cmd.epoch, cmd.node)
    if bad is not None:
        return bad
    target = job.move_to
    state._cancel_move(job)
    state._end_attempt(job, cmd.time, "moved")
    state._release(job)
    job.moves += 1
    if job.cancel_requested:
        state._set_status(job, CANCELED, cmd.time)
        return Result(True, None)
    state._set_status(job, CREATED, cmd.time)
    peer = state.peers.get(target) if target else None
    if (peer is not None and peer.state == ALIVE and not peer.draining
            and state.slots_used(target) + job.slots <= peer.slots):
        state._assign_to(job, target, cmd.time)
        return Result(True, target)
    state.pending[job.id] = None  # the target went away: placement decides
    return Result(True, None)


def _drain_peer(state: ClusterState, cmd: c.DrainPeer) -> Result:
    peer = state.peers.get(cmd.node)
    if peer is None:
        return Result.fail("not-found", f"unknown peer {cmd.node}")
    if cmd.drain and peer.state != ALIVE:
        return Result.fail("conflict", f"peer {cmd.node} is {peer.state}; only a live peer "
                                       "can be drained")
    if peer.leaving and not cmd.drain:
        return Result.fail("conflict", f"peer {cmd.node} is being removed from the cluster")
    peer.draining = bool(cmd.drain)
    peer.drain_deadline = cmd.deadline if cmd.drain else None
    if peer.draining:  # moves planned onto it go elsewhere
        for job_id in list(state.incoming.get(cmd.node, {})):
            state._cancel_move(state.jobs[job_id])
    return Result(True, state.jobs_of(cmd.node))


_HANDLERS = {
    c.RegisterPeer: _register_peer,
    c.Heartbeat: _heartbeat,
    c.LeaseRound: _lease_round,
    c.DeclarePeerDead: _declare_dead,
    c.SubmitJob: _submit,
    c.SubmitJobs: _submit_many,
    c.AssignJobs: _assign,
    c.ReportStatuses: _report,
    c.CancelJob: _cancel,
    c.PurgeJobs: _purge,
    c.TriggerSavepoint: _trigger_savepoint,
    c.CompleteSavepoint: _complete_savepoint,
    c.MoveJobs: _move_jobs,
    c.ReleaseJob: _release_job,
    c.DrainPeer: _drain_peer,
    c.Barrier: lambda st, cmd: Result(True),
    **sql.HANDLERS,
    **members.HANDLERS,
    **artifacts.HANDLERS,
}
