"""Named pipelines on a peer (`PUT/GET/DELETE /pipelines/{name}`, `GET /pipelines`, `jm
pipeline`): the spec is checked as a job's is, then one Raft command creates, keeps or
upgrades the pipeline (raft/pipelines.py does the rest in the replicated state: stop with
a savepoint, start the next version from it)."""
from __future__ import annotations

import re
import time
import uuid
from typing import TYPE_CHECKING, Any, Optional

from jm.api import ANYONE, ApiError, Credential
from jm.cluster.api.apiwrites import Writes, api_errors
from jm.cluster.api.resolver import SubmissionResolver
from raft import pipelines as P
from raft.commands import DeletePipeline, PutPipeline

if TYPE_CHECKING:
    from raft.node import RaftHost

STATUS = {"created": 201, "upgrading": 202}  # else 200 (unchanged, upgraded)


def view(p: P.PipelineRecord, jobs: dict, history: bool) -> dict:
    """A pipeline as GET /pipelines/{name} shows it (pure)."""
    cur = p.current
    job = jobs.get(cur.job_id)
    out = {"name": p.name, "tenant": p.tenant, "version": cur.version, "jobid": cur.job_id,
           "state": job.status if job is not None else None,
           "job-type": cur.spec.get("job-type", "batch"), "updated": p.updated,
           "pending-version": p.pending.version if p.pending is not None else None,
           "last-error": p.last_error}
    if history:
        out["spec"] = cur.spec
        out["versions"] = [{"version": v.version, "jobid": v.job_id, "started": v.started,
                            "submitter": v.submitter, "restored-from": v.restored_from,
                            "spec": v.spec} for v in p.versions]
        if p.pending is not None:
            out["pending"] = {"version": p.pending.version, "jobid": p.pending.job_id,
                              "spec": p.pending.spec, "requested": p.pending.requested}
    return out


class Pipelines:
    def __init__(self, raft: "RaftHost", writes: Writes, resolver: SubmissionResolver
                 ) -> None:
        self.raft, self.writes, self.resolver = raft, writes, resolver

    @api_errors
    async def put(self, name: str, body: Any, who: Credential = ANYONE
                  ) -> tuple[int, dict]:
        """(status, answer): 201 created, 200 unchanged or upgraded at once, 202 upgrading
        (the running version stops with a savepoint first)."""
        if not isinstance(body, dict):
            raise ApiError(400, "the body is a job spec (a JSON object)")
        if "jobid" in body:
            raise ApiError(400, "jobid: a pipeline's jobs get their ids from it (leave it "
                                "out)")
        sub = self.resolver.prepare(dict(body, name=body.get("name") or name), None, who)
        tenant = sub.spec.tenant
        self.writes.writable()
        spec = (await self.resolver.resolve(sub, None, who)).wire()
        spec.pop("jobid", None)  # (each version's job gets one of its own)
        job_id = re.sub(r"[^A-Za-z0-9_-]", "-", name[:40]) + "-" + uuid.uuid4().hex[:16]
        out = await self.writes.write(PutPipeline(name, spec, job_id, time.time(), tenant,
                                                  who.name))
        return STATUS.get(out["outcome"], 200), out

    def list(self, who: Credential) -> dict:
        with self.raft.read() as st:
            return {"pipelines": [view(p, st.jobs, False) for _, p in
                                  sorted(st.pipelines.items()) if who.may_see(p.tenant)]}

    def get(self, name: str) -> Optional[dict]:
        with self.raft.read() as st:
            p = st.pipelines.get(name)
            return view(p, st.jobs, True) if p is not None else None

    @api_errors
    async def delete(self, name: str) -> dict:
        out = await self.writes.write(DeletePipeline(name, time.time()))
        with self.raft.read() as st:
            job = st.jobs.get(out["jobid"])
            out["state"] = job.status if job is not None else None
        out["deleted"] = True
        return out

