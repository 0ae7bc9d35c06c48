"""Jobs in the replicated state (pure, like raft/state.py): submission, placement,
status reports (with what an attempt says of its Spark application), cancel and purge,
moves between peers and their release, and the requeue of a lost peer's jobs (with the
evidence `peer_losses` reads of a job that may kill its peers). Savepoints are in
raft/savepoints.py."""
from __future__ import annotations

from typing import Any, Optional

from raft import artifacts
from raft import commands as c
from raft.jobspec import JobSpec, wire_problems
from raft.records import (
    CREATED, RESTARTING, CANCELLING, CANCELED, FAILED, FINISHED, TERMINAL, REPORTABLE,
    ALIVE, MAX_FAILURES_KEPT, Result, PeerRecord, JobRecord, PeerLoss)


# A job whose attempts end with their peer's loss right after they started, again and
# again (on one peer restarted by its supervisor each time, or on one peer after another),
# may be what kills them (it exhausts the host's memory, kills the peer user's processes).
# The replicated state only keeps the evidence: each attempt's `peer_heard` (how long its
# peer was heard from after it was placed, when it ended with the peer's loss). The
# JobMaster of the next attempt counts the run of such losses against the job's restart
# strategy (jm/policy/jobs/attempt.py): it waits the strategy's delay, or fails the job once
# the strategy is used up. A chaos of host losses does not look like that: a peer killed
# while it runs a job that has run for a while, or that was placed on it after it died
# (no heartbeat of it since), does not count.
YOUNG_LOSS = 5.0    # s: a loss of the peer heard from for less than this after placement


def peer_losses(attempts: list) -> tuple[PeerLoss, ...]:
    """Pure: the ended attempts (oldest first) that lost their peer right after they
    started, in the last run of them (an attempt that ended otherwise breaks the run; the
    attempt still running is passed over)."""
    out: list[PeerLoss] = []
    for a in reversed(attempts):
        if a.end is None:
            continue
        if a.reason != "peer-lost" or a.peer_heard is None or a.peer_heard >= YOUNG_LOSS:
            break
        out.append(PeerLoss(a.node, a.end))
    return tuple(reversed(out))


def requeue_jobs_of(state, node: str, time: float, reason: str,
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
        else:
            state._set_status(job, CREATED, time)
            state.pending[job.id] = None
            moved.append(job_id)
    return moved


def _submit(state, cmd: c.SubmitJob) -> Result:
    if cmd.request_id and cmd.request_id in state.request_ids:
        # an idempotent retry of an acknowledged (or unknown-outcome) submission
        return Result(True, {"jobid": state.request_ids[cmd.request_id], "duplicate": True})
    if cmd.job_id in state.jobs:
        return Result.fail("exists", f"job {cmd.job_id} already exists")
    problems = wire_problems(cmd.spec)
    if problems:
        return Result.fail("invalid", "; ".join(problems))
    spec = JobSpec.from_wire(cmd.spec, jobid=cmd.job_id)
    gone = artifacts.unknown(state, spec)
    if gone:  # (forgotten by the janitor since the peer checked)
        return Result.fail("invalid", "; ".join(
            f"unknown artifact artifact:{a}; upload it with POST /artifacts" for a in gone))
    job = JobRecord(cmd.job_id, spec.name or cmd.job_id, spec, cmd.time, cmd.request_id,
                    tenant=cmd.tenant, submitter=cmd.submitter)
    job.timestamps[CREATED] = cmd.time
    state.jobs[job.id] = job
    state._count(job.status, 1)
    state.pending[job.id] = None
    job.number, state.next_number = state.next_number, state.next_number + 1
    state.by_number[job.number] = job.id
    if cmd.request_id:
        state.request_ids[cmd.request_id] = job.id
    return Result(True, {"jobid": job.id, "duplicate": False})


def _submit_many(state, cmd: c.SubmitJobs) -> Result:
    return each_item(state, cmd.jobs, c.SubmitJob, _submit)


def _assign(state, cmd: c.AssignJobs) -> Result:
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


def _report_one(state, r: c.StatusReport) -> Result:
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
    if r.progress is not None and not isinstance(r.progress, dict):
        return Result.fail("invalid", "a progress must be a mapping")
    if r.seq:
        if r.seq <= job.report_seq:
            return Result(True, "duplicate")  # applied already (a retried batch)
        job.report_seq = r.seq
    if job.attempts:
        job.attempts[-1].reported = True  # it ran on its peer (peer_losses)
    if r.progress is not None:  # the job's last progress only: its status stays
        job.progress = r.progress
        return Result(True)
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


def each_item(state, items: Any, kind: type, handler) -> Result:
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


def _report(state, cmd: c.ReportStatuses) -> Result:
    return each_item(state, cmd.reports, c.StatusReport, _report_one)


def _cancel(state, cmd: c.CancelJob) -> Result:
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


def _purge(state, cmd: c.PurgeJobs) -> Result:
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


def owner_check(job: Optional[JobRecord], job_id: str, epoch: int, node: str) -> Optional[Result]:
    if job is None:
        return Result.fail("not-found", f"unknown job {job_id}")
    if job.node is None or epoch != job.epoch or node != job.node:
        return Result.fail("stale", f"stale request for {job_id}: epoch {epoch} on {node}, "
                                    f"owner is epoch {job.epoch} on {job.node}")
    return None


def _move_one(state, m: c.Move) -> Result:
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


def _move_jobs(state, cmd: c.MoveJobs) -> Result:
    return each_item(state, cmd.moves, c.Move, _move_one)


def _release_job(state, cmd: c.ReleaseJob) -> Result:
    job = state.jobs.get(cmd.job_id)
    bad = owner_check(job, cmd.job_id, cmd.epoch, cmd.node)
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


HANDLERS = {
    c.SubmitJob: _submit,
    c.SubmitJobs: _submit_many,
    c.AssignJobs: _assign,
    c.ReportStatuses: _report,
    c.CancelJob: _cancel,
    c.PurgeJobs: _purge,
    c.MoveJobs: _move_jobs,
    c.ReleaseJob: _release_job,
}
