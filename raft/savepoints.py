"""Savepoints of streaming jobs in the replicated state (pure, like raft/state.py): a
request to take one (TriggerSavepoint, or to stop the job with one), kept until the job's
owner reports it taken or failed (CompleteSavepoint); a stop-with-savepoint that succeeds
ends the job FINISHED."""
from __future__ import annotations

from raft import commands as c, pipelines
from raft.jobs import owner_check
from raft.records import (
    FINISHED, TERMINAL, COMPLETED, IN_PROGRESS, MAX_SAVEPOINTS_KEPT, MAX_PENDING_SAVEPOINTS,
    MAX_SAVEPOINT_TARGET, Result, SavepointRecord)


def _trigger_savepoint(state, cmd: c.TriggerSavepoint) -> Result:
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


def _complete_savepoint(state, cmd: c.CompleteSavepoint) -> Result:
    job = state.jobs.get(cmd.job_id)
    bad = owner_check(job, cmd.job_id, cmd.epoch, cmd.node)
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
            if job.id in state.upgrading:  # a pipeline's upgrade: it stays as it was
                pipelines.stop_failed(state, job.id, sp.id, sp.failure)
        return Result(True)
    sp.location = str(cmd.location)
    job.savepoint_location = sp.location
    if sp.stop and job.stop_trigger == sp.id:
        job.result = cmd.result
        state._end_attempt(job, cmd.time, "stopped")
        state._release(job)
        state._set_status(job, FINISHED, cmd.time)
    return Result(True)


HANDLERS = {
    c.TriggerSavepoint: _trigger_savepoint,
    c.CompleteSavepoint: _complete_savepoint,
}
