"""Jobs written through a peer's REST gateway: a submission (checked and fetched by the
resolver, then batched into a Raft command with others), a cancel, a savepoint."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Optional

from jm.api import ANYONE, ApiError, Credential
from jm.cluster.api.apiwrites import Writes, api_errors
from jm.cluster.api.resolver import SubmissionResolver
from jm.policy.jobs import fsuri
from raft.commands import CancelJob, SubmitJob, TriggerSavepoint

if TYPE_CHECKING:
    from jm.cluster.submitroute import SubmitRoute
    from raft.node import RaftHost


class JobWrites:
    def __init__(self, raft: "RaftHost", writes: Writes, resolver: SubmissionResolver,
                 submitter: "SubmitRoute") -> None:
        self.raft, self.writes, self.resolver = raft, writes, resolver
        self.submitter = submitter  # submissions, into the leader's Raft batches

    @api_errors
    async def submit(self, spec: Any, request_id: str, names: Optional[dict] = None,
                     who: Credential = ANYONE) -> dict:
        """`names`: what the client calls the spec's fields, for its errors (Livy's);
        `who`: the caller (the job's tenant and submitter)."""
        sub = self.resolver.prepare(spec, names, who)
        tenant = sub.spec.tenant
        self.writes.writable()
        request_id = tenant_request_id(tenant, request_id)
        if request_id:  # a retry of a request this replica applied: its job, nothing read again
            with self.raft.read() as st:
                known = st.request_ids.get(request_id)
            if known is not None:
                return {"jobid": known}
        job = await self.resolver.resolve(sub, names, who)
        res = await self.submitter.submit(SubmitJob(job.jobid, job.wire(), time.time(),
                                                    request_id, tenant, who.name))
        if not res.ok:
            raise ApiError(409 if res.code in ("exists", "protocol") else 400, res.error)
        return {"jobid": res.value["jobid"]}

    @api_errors
    async def cancel(self, job_id: str) -> str:
        return await self.writes.write(CancelJob(job_id, time.time()))

    @api_errors
    async def savepoint(self, job_id: str, trigger_id: str, target: Optional[str],
                        stop: bool, who: Credential = ANYONE) -> dict:
        if target is not None:
            try:  # "/a", "file:///a", "s3a://bucket/a" ... -> one canonical spelling
                target = fsuri.location(target, "target-directory")
            except ValueError as exc:
                raise ApiError(400, str(exc))
            await self.resolver.savepoint_place(target, "target-directory", who)
            await self.resolver.check_location(target, "target-directory")
        out = await self.writes.write(TriggerSavepoint(job_id, trigger_id, target, stop,
                                                       time.time()))
        return {"request-id": out["request-id"]}


def tenant_request_id(tenant: Optional[str], request_id: str) -> str:
    """The key of a submission's X-Request-Id in the replicated state: a tenant's own
    (another tenant sending the same id makes a job of its own, and is never answered
    with this one's); the default tenant's as it was sent."""
    return f"{tenant}/{request_id}" if tenant and request_id else request_id
