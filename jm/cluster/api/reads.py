"""The read side of a peer's REST gateway: jobs as the replicated state shows them (typed
views, pages of the list routes), and an attempt's log."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Optional

from jm.api import ANYONE, ApiError, Credential
from jm.cluster.api.apiwrites import Writes
from jm.cluster.peerclient import PeerUnreachable
from jm.policy.api.pages import DEFAULT_LIMIT
from jm.policy.jobs.progress import progress_view
from jm.runtime import joblogs
from jm.wire import views
from raft.tenants import key as tenant_key

if TYPE_CHECKING:
    from jm.cluster.api.joblists import JobLists
    from jm.cluster.peerclient import PeerClient
    from raft.node import RaftHost


class JobViews:
    """Jobs as the replicated state shows them (None: no such job), pages of the list
    routes, and an attempt's log (read here, or fetched from the peer that ran it)."""

    def __init__(self, *, node: str, raft: "RaftHost", writes: Writes, lists: "JobLists",
                 quota_reason: Callable[[str], Optional[str]],
                 url_of: Callable[[str, int], str], peer_client: "PeerClient",
                 log_dir: str) -> None:
        self.node, self.raft, self.writes, self.lists = node, raft, writes, lists
        self.quota_reason = quota_reason  # why a waiting job waits (its tenant's quota)
        self.url_of, self.peer_client, self.log_dir = url_of, peer_client, log_dir

    def overview(self) -> dict:
        leader = self.writes.leader()
        with self.raft.read() as st:
            return views.overview(st, leader)

    def _of_job(self, job_id: str, show: Any, *args: Any) -> Optional[Any]:
        with self.raft.read() as st:
            job = st.jobs.get(job_id)
            return show(job, *args) if job is not None else None

    def job_detail(self, job_id: str) -> Optional[dict]:
        out = self._of_job(job_id, _job_detail, time.time())
        if out is not None and out.get("state") == "CREATED":
            reason = self.quota_reason(job_id)
            if reason:
                out["waiting"] = reason
        return out

    def job_exceptions(self, job_id: str) -> Optional[dict]:
        return self._of_job(job_id, views.job_exceptions)

    def job_result(self, job_id: str) -> Optional[dict]:
        return self._of_job(job_id, views.job_result)

    def job_savepoints(self, job_id: str) -> Optional[dict]:
        return self._of_job(job_id, views.job_savepoints)

    def savepoint_status(self, job_id: str, request_id: str) -> Optional[dict]:
        """None: no such job, or no such request of it."""
        return self._of_job(job_id, views.savepoint_status, request_id)

    # pages of the list routes (400 for a parameter out of range)
    def jobs_page(self, query: Any, who: Credential = ANYONE) -> dict:
        """Jobs of `who`'s tenant (every one for an admin), newest first, DEFAULT_LIMIT by
        default."""
        return self.lists.jobs_page(query, None if who.sees_all else who.tenant)

    def nodes_page(self, query: Any, who: Credential = ANYONE) -> dict:
        """Every peer by default, with the ids of `who`'s tenant's jobs on each (and how
        many jobs each runs in all)."""
        leader = self.writes.leader()
        with self.raft.read() as st:
            out = views.nodes(st, leader, self.raft.membership.members(),
                              views.ALL_TENANTS if who.sees_all else who.tenant)
        return {**out, **self.lists.page(query, "nodes", out["nodes"], None)}

    def artifacts_page(self, query: Any, who: Credential = ANYONE) -> dict:
        """The artifacts of `who`'s tenant (every one for an admin), DEFAULT_LIMIT by
        default."""
        with self.raft.read() as st:
            out = views.artifacts(st, None if who.sees_all else tenant_key(who.tenant))
        return {**out, **self.lists.page(query, "artifacts", out["artifacts"], DEFAULT_LIMIT)}

    async def jobs_overview(self, query: Any, id_ok: Any = None,
                            who: Credential = ANYONE) -> list[bytes]:
        return await self.lists.overview(query, id_ok, None if who.sees_all else who.tenant)

    async def job_logs(self, job_id: str, attempt: Optional[int], offset: int,
                       tail: Optional[int], local: bool) -> dict:
        """An attempt's log, read here or fetched from the peer that ran the attempt."""
        with self.raft.read() as st:
            job = st.jobs.get(job_id)
            if job is None:
                raise ApiError(404, f"job {job_id} not found")
            if not job.attempts:
                raise ApiError(404, f"job {job_id} has not run yet; it has no logs")
            attempt = attempt or job.attempts[-1].epoch
            rec = next((a for a in job.attempts if a.epoch == attempt), None)
            if rec is None:
                raise ApiError(404, f"job {job_id} has no attempt {attempt} (attempts "
                                    f"1-{job.attempts[-1].epoch})")
            peer = st.peers.get(rec.node)
            url = self.url_of(peer.host, peer.rest_port) if peer else None
        out = {"job": job_id, "attempt": attempt, "node": rec.node, "ended": rec.end is not None}
        if rec.node == self.node:
            files = joblogs.attempt_files(self.log_dir, job_id, attempt)
            out.update(joblogs.read(files, offset, tail))
            return out
        if local or url is None:
            raise ApiError(404, f"the logs of attempt {attempt} are on peer {rec.node}")
        query = {"attempt": str(attempt), "local": "1"}
        if tail is not None:
            query["tail"] = str(tail)
        else:
            query["offset"] = str(offset)
        try:
            # the attempt's peer may not have applied the attempt we read yet: it answers
            # once it has (X-JM-Min-Index), never a 404 for a job it has not heard of
            answer = await self.peer_client.call(
                "GET", f"{url}/jobs/{job_id}/logs", 10.0, params=query,
                min_index=self.raft.applied_index())
        except PeerUnreachable as exc:
            raise ApiError(503, f"the logs of attempt {attempt} are on peer {rec.node}, "
                                f"which did not answer: {exc}", headers={"Retry-After": "1"})
        if answer.status != 200:
            raise ApiError(answer.status if answer.status in (400, 401, 404) else 503,
                           *answer.errors(), headers={"Retry-After": answer.retry_after or "1"})
        return answer.body


def _job_detail(job: Any, now: float) -> dict:
    """A job's details, with a streaming job's last progress (issue 31)."""
    out = views.job_detail(job, now)
    progress = progress_view(getattr(job, "progress", None))
    if progress is not None:
        out["progress"] = progress
    return out
