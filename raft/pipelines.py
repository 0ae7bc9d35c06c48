"""Named pipelines in the replicated state (pure, like raft/state.py): `PUT
/pipelines/{name}` with a job spec creates a pipeline (its first version's job is
submitted in the same command), answers an unchanged spec with the running version
(GitOps tools apply a directory of pipelines again and again), and upgrades a changed one
in place: the running job stops with a savepoint (a batch job is cancelled), and once it
has ended the next version's job starts from that savepoint, in the command that applied
the end (`ClusterState._set_status` notes it, `after_apply` starts it), so no peer has
to live through the upgrade. Each version's spec is kept (the last MAX_VERSIONS), so a
rollback is a PUT of an older one. A stop that fails leaves the old version running and
says why (`last_error`)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from raft import commands as c
from raft.records import TERMINAL, Result

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_VERSIONS = 20      # versions kept per pipeline (its history)
MAX_PIPELINES = 10_000
TRIGGER = "pipeline-{}-v{}"  # the stop-with-savepoint request of an upgrade


@dataclass
class PipelineVersion:
    version: int
    spec: dict              # as the user gave it (validated; no job id)
    job_id: str
    started: float
    submitter: str = ""
    restored_from: Optional[str] = None  # the savepoint its job started from


@dataclass
class PendingVersion:
    """An upgrade waiting for the running version's job to end."""
    version: int
    spec: dict
    job_id: str             # the id its job gets
    requested: float
    submitter: str = ""


@dataclass
class PipelineRecord:
    name: str
    tenant: Optional[str]
    versions: list = field(default_factory=list)  # PipelineVersion, oldest first
    pending: Optional[PendingVersion] = None
    last_error: Optional[str] = None
    updated: float = 0.0

    @property
    def current(self) -> PipelineVersion:
        return self.versions[-1]


def same_spec(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True,
                                                                    default=str)


def put(state, cmd: c.PutPipeline) -> Result:
    if not isinstance(cmd.name, str) or not NAME.fullmatch(cmd.name):
        return Result.fail("invalid", "a pipeline's name is 1-64 letters, digits, '.', '_' "
                                      "or '-', starting with a letter or digit")
    if not isinstance(cmd.spec, dict):
        return Result.fail("invalid", "a pipeline's spec is a job spec (a JSON object)")
    p = state.pipelines.get(cmd.name)
    if p is None:
        return _create(state, cmd)
    if p.tenant != cmd.tenant:
        return Result.fail("conflict", f"a pipeline named {cmd.name} exists (another "
                                       "tenant's)")
    if p.pending is not None and same_spec(p.pending.spec, cmd.spec):
        return Result(True, _answer(p, "upgrading"))  # the same request again
    if p.pending is None and same_spec(p.current.spec, cmd.spec):
        return Result(True, _answer(p, "unchanged"))
    old = state.jobs.get(p.current.job_id)
    if old is not None and old.status not in TERMINAL and p.pending is not None:
        return Result.fail("conflict", f"pipeline {cmd.name} is upgrading to version "
                                       f"{p.pending.version}; apply again once it runs")
    pending = PendingVersion(p.current.version + 1, dict(cmd.spec), cmd.job_id, cmd.time,
                             cmd.submitter)
    if old is None or old.status in TERMINAL:
        p.pending = pending
        return _start(state, p, cmd.time)
    refused = _stop(state, old, TRIGGER.format(cmd.name, pending.version), cmd.time)
    if refused is not None:
        return Result.fail("conflict", f"pipeline {cmd.name} cannot be upgraded now: "
                                       f"{refused}")
    p.pending, p.last_error, p.updated = pending, None, cmd.time
    state.upgrading[old.id] = cmd.name
    return Result(True, _answer(p, "upgrading"))


def _create(state, cmd: c.PutPipeline) -> Result:
    if len(state.pipelines) >= MAX_PIPELINES:
        return Result.fail("full", f"there are {MAX_PIPELINES} pipelines; delete some first")
    p = PipelineRecord(cmd.name, cmd.tenant, updated=cmd.time)
    p.pending = PendingVersion(1, dict(cmd.spec), cmd.job_id, cmd.time, cmd.submitter)
    res = _start(state, p, cmd.time)
    if res.ok:
        state.pipelines[cmd.name] = p
        res.value["outcome"] = "created"
    return res


def _stop(state, job, trigger: str, time: float) -> Optional[str]:
    """Stop the running version's job: with a savepoint if it streams, else cancel it.
    Why it cannot be stopped now, or None."""
    from raft import jobs, savepoints
    if job.streaming:
        res = savepoints.HANDLERS[c.TriggerSavepoint](
            state, c.TriggerSavepoint(job.id, trigger, None, True, time))
    else:
        res = jobs.HANDLERS[c.CancelJob](state, c.CancelJob(job.id, time))
    return None if res.ok else res.error


def _start(state, p: PipelineRecord, time: float) -> Result:
    """Submit the pending version's job (from the last version's savepoint, if it took
    one); the pending version becomes the current one."""
    from raft import jobs
    pending = p.pending
    spec = dict(pending.spec, jobid=pending.job_id, name=pending.spec.get("name") or p.name)
    old = state.jobs.get(p.current.job_id) if p.versions else None
    restored = old.savepoint_location if old is not None and old.streaming else None
    if restored and spec.get("job-type") == "streaming":
        spec["savepoint-path"] = restored
    res = jobs.HANDLERS[c.SubmitJob](state, c.SubmitJob(
        pending.job_id, spec, time, "", p.tenant, pending.submitter))
    p.pending, p.updated = None, time
    if not res.ok:
        p.last_error = f"version {pending.version} did not start: {res.error}"
        return res
    p.versions.append(PipelineVersion(pending.version, pending.spec, pending.job_id, time,
                                      pending.submitter, spec.get("savepoint-path")))
    del p.versions[:-MAX_VERSIONS]
    p.last_error = None
    return Result(True, _answer(p, "upgraded"))


def _answer(p: PipelineRecord, outcome: str) -> dict:
    return {"name": p.name, "outcome": outcome, "version": p.current.version,
            "jobid": p.current.job_id,
            "pending-version": p.pending.version if p.pending is not None else None}


def job_ended(state, job_id: str, time: float) -> None:
    """After a command ended the running version's job of a pipeline that waits to be
    upgraded (ClusterState.apply): start the next version."""
    name = state.upgrading.pop(job_id, None)
    p = state.pipelines.get(name) if name is not None else None
    if p is None or p.pending is None or p.current.job_id != job_id:
        return
    _start(state, p, time)


def stop_failed(state, job_id: str, trigger: str, failure: str) -> None:
    """The upgrade's stop-with-savepoint failed: the running version keeps running."""
    name = state.upgrading.get(job_id)
    p = state.pipelines.get(name) if name is not None else None
    if p is None or p.pending is None or trigger != TRIGGER.format(name, p.pending.version):
        return
    state.upgrading.pop(job_id, None)
    p.last_error = (f"the upgrade to version {p.pending.version} failed, version "
                    f"{p.current.version} runs on: its stop-with-savepoint failed: "
                    f"{failure}"[:2000])
    p.pending = None


def delete(state, cmd: c.DeletePipeline) -> Result:
    p = state.pipelines.get(cmd.name)
    if p is None:
        return Result.fail("not-found", f"pipeline {cmd.name} not found")
    job = state.jobs.get(p.current.job_id)
    if job is not None and job.status not in TERMINAL and not job.cancel_requested:
        from raft import jobs
        jobs.HANDLERS[c.CancelJob](state, c.CancelJob(job.id, cmd.time))
    state.upgrading.pop(p.current.job_id, None)
    del state.pipelines[cmd.name]
    return Result(True, {"name": cmd.name, "jobid": p.current.job_id})


HANDLERS = {c.PutPipeline: put, c.DeletePipeline: delete}
