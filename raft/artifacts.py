"""Uploaded artifacts in the replicated state (pure, like raft/state.py).

An artifact is known from its upload (AddArtifact; a re-upload of the same content makes
it young again) until the leader's janitor forgets it (ForgetArtifacts): no job in the
job store names it and it was last uploaded more than jobmanager.blob.grace-period ago,
as its files go (jm/policy/jobs/cleanup.py). A job is accepted only while every artifact it
names is known, so a submission and a forget racing each other never leave a job naming
a forgotten artifact.
"""
from __future__ import annotations

from raft import commands as c
from raft.jobspec import JobSpec
from raft.records import ArtifactRecord, Result

PREFIX = "artifact:"
MAX_TENANTS_KEPT = 100  # tenants that uploaded the same content, kept with it


def named_by(spec: JobSpec) -> list[str]:
    """The artifact ids (`sha256:<hex>`) a job spec names (its pyfiles and script)."""
    return [r[len(PREFIX):] for r in spec.code_refs() if r.startswith(PREFIX)]


def unknown(state, spec: JobSpec) -> list[str]:
    return [a for a in named_by(spec) if a not in state.artifacts]


def add(state, cmd: c.AddArtifact) -> Result:
    art = state.artifacts.get(cmd.artifact_id)
    if art is None:
        state.artifacts[cmd.artifact_id] = ArtifactRecord(
            cmd.artifact_id, cmd.name, cmd.size, [cmd.node], cmd.time,
            [str(t) for t in tuple(cmd.tenants)[:1]], str(cmd.submitter))
        return Result(True, cmd.artifact_id)
    for tenant in tuple(cmd.tenants)[:1]:
        if str(tenant) not in art.tenants and len(art.tenants) < MAX_TENANTS_KEPT:
            art.tenants.append(str(tenant))
    if cmd.node not in art.nodes:
        art.nodes.append(cmd.node)
    if isinstance(cmd.time, (int, float)) and cmd.time > art.created:
        art.created = cmd.time  # given again: young again (as its blob's mtime)
    return Result(True, cmd.artifact_id)


def forget(state, cmd: c.ForgetArtifacts) -> Result:
    """Forget those of `artifact_ids` last uploaded before `before` that no job names;
    the ids forgotten. With `tenant`: that tenant's claim on each goes first, and only an
    artifact no tenant claims any more is forgotten; the ids whose claim went."""
    if not isinstance(cmd.artifact_ids, tuple) or not isinstance(cmd.before, (int, float)) \
            or not isinstance(cmd.tenant, str):
        return Result.fail("invalid", "malformed ForgetArtifacts")
    named: set = set()
    for job in state.jobs.values():
        named.update(named_by(job.spec))
    gone = []
    for aid in cmd.artifact_ids:
        art = state.artifacts.get(aid) if isinstance(aid, str) else None
        if art is None:
            continue
        if cmd.tenant:
            if cmd.tenant not in art.tenants:
                continue
            art.tenants.remove(cmd.tenant)
            gone.append(aid)
            if art.tenants:  # another tenant's still
                continue
        if aid not in named and art.created < cmd.before:
            del state.artifacts[aid]
            if not cmd.tenant:
                gone.append(aid)
    return Result(True, gone)


HANDLERS = {
    c.AddArtifact: add,
    c.ForgetArtifacts: forget,
}
