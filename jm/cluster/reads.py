"""The read side of a peer's REST gateway: what the replicated state shows (typed views,
pages, logs), the peer's health and gauges. Writes are in jm/cluster/gateway.py."""
from __future__ import annotations

import functools
import os
import re
import time
from typing import Any, Optional

from jm.cluster.peerclient import PeerUnreachable
from jm.cluster.services import GatewayServices
from jm.policy.pages import DEFAULT_LIMIT
from jm.policy.progress import progress_view
from jm.policy.spec import SpecError
from jm.runtime import joblogs
from jm.wire import livy, views
from raft.node import RaftUnavailable
from raft.tenants import key as tenant_key
from rest.gateway import ANYONE, ApiError, Credential


def api_errors(fn):
    """A gateway write's failures as HTTP errors: 400 for a bad spec, 503 (retry) when
    there is no leader or the write's outcome is unknown."""
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kw: Any) -> Any:
        try:
            return await fn(*args, **kw)
        except SpecError as exc:  # 400, or 413 for a spec over its byte limit
            raise ApiError(exc.status, *exc.errors)
        except UnicodeEncodeError:  # e.g. "\udcff" in JSON: Raft stores UTF-8 text only
            raise ApiError(400, "the request holds text that is not valid Unicode (a lone "
                                "surrogate such as \\udcff); send UTF-8 text")
        except RaftUnavailable as exc:
            raise ApiError(503, str(exc), headers={"Retry-After": "1"})
    return wrapper


class GatewayBase:
    """The services, and what reads and writes share: the leader as this peer sees it,
    the applied index."""

    def __init__(self, svc: GatewayServices) -> None:
        self.svc = svc
        self.node, self.conf, self.raft = svc.node, svc.conf, svc.raft
        self.sql = svc.sql
        self.log_dir = svc.log_dir

    @property
    def max_spec_size(self) -> int:
        """jobmanager.spec.max-size: REST refuses a larger job spec before reading it."""
        return self.conf["jobmanager.spec.max-size"]

    def _leader(self) -> Optional[str]:
        """The Raft leader as far as this peer can tell. An isolated pysyncobj follower
        keeps naming its last leader (it starts no election while connected to nobody),
        so a peer whose lease has run out knows no leader."""
        if self.svc.lease.expired():
            return None
        return self.raft.leader()

    def _writable(self) -> None:
        if not self.svc.started():  # REST is up before the peer's writers are
            raise RaftUnavailable("this peer is still starting; retry, or use another peer")
        if self._leader() is None:
            raise RaftUnavailable("no Raft leader reachable from this peer at the moment; "
                                  "retry, or use another peer")

    async def _write(self, command: Any) -> Any:
        """One Raft command for a REST write; refusals become 404/409/400."""
        self._writable()
        res = await self.raft.submit(command, self.conf["rest.write-timeout"])
        if not res.ok:
            raise ApiError({"not-found": 404, "conflict": 409, "protocol": 409}
                           .get(res.code, 400), res.error)
        return res.value

    def applied_index(self) -> int:
        return self.raft.applied_index()

    async def wait_applied(self, index: int, timeout: float) -> bool:
        return await self.raft.wait_applied(index, timeout)


class PeerReads(GatewayBase):
    def __init__(self, svc: GatewayServices) -> None:
        super().__init__(svc)
        self.lists = svc.lists

    # ---- views of the replicated state (None: no such job) ----------------------------
    def overview(self) -> dict:
        leader = self._leader()
        with self.raft.read() as st:
            return views.overview(st, leader)

    def _of_job(self, job_id: str, show: Any, *args: Any) -> Optional[Any]:
        with self.raft.read() as st:
            job = st.jobs.get(job_id)
            return show(job, *args) if job is not None else None

    def job_detail(self, job_id: str) -> Optional[dict]:
        out = self._of_job(job_id, _job_detail, time.time())
        if out is not None and out.get("state") == "CREATED":
            reason = self.quota_reason(job_id)  # (jm/cluster/tenancy.py)
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

    def livy_version(self) -> dict:
        return {"version": livy.VERSION, "gitCommit": "", "user": "", "url": "",
                "branch": "", "date": ""}

    def livy_batches(self, start: int, size: int, who: Credential = ANYONE) -> dict:
        with self.raft.read() as st:
            return livy.batches([j for j in st.jobs.values() if who.may_see(j.tenant)],
                                start, size)

    def livy_batch(self, number: int) -> Optional[tuple[str, dict]]:
        """The batch with this number: (its job's id, the batch), or None."""
        with self.raft.read() as st:
            job = st.jobs.get(st.by_number.get(number, ""))
            return (job.id, livy.batch(job)) if job is not None else None

    def list_page(self, name: str, query: Any, who: Credential = ANYONE) -> dict:
        """A page of a list route: jobs (newest first, DEFAULT_LIMIT by default), nodes
        (all by default), artifacts (DEFAULT_LIMIT); 400 for a parameter out of range.
        Jobs and artifacts: those of `who`'s tenant (every one for an admin); nodes: the
        ids of its jobs on each (and how many jobs each runs in all)."""
        if name == "jobs":
            return self.lists.jobs_page(query, None if who.sees_all else who.tenant)
        if name == "nodes":
            leader = self._leader()
            with self.raft.read() as st:
                out = views.nodes(st, leader, self.raft.members(),
                                  views.ALL_TENANTS if who.sees_all else who.tenant)
        elif name == "artifacts":
            with self.raft.read() as st:
                out = views.artifacts(st, None if who.sees_all else tenant_key(who.tenant))
        else:
            raise KeyError(name)
        return {**out, **self.lists.page(query, name, out[name],
                                         None if name == "nodes" else DEFAULT_LIMIT)}

    async def jobs_overview(self, query: Any, id_ok: Any = None,
                            who: Credential = ANYONE) -> list[bytes]:
        return await self.lists.overview(query, id_ok, None if who.sees_all else who.tenant)

    def identity(self) -> dict:
        """What this replica knows of the cluster, without a leader (a starting peer whose
        Raft data is missing asks this: jm/policy/identity.py): its id and the peers
        registered in it (not removed). Until this peer's own registration is applied
        here, its replica may still be replaying the log (a restarted member applies its
        journal only once a leader tells it what is committed): it is `starting`, and
        cannot say yet whom the cluster knows; `has-data`: it started with Raft data (it
        belongs to a cluster, even before it can name it)."""
        with self.raft.read() as st:
            return {"cluster-id": st.cluster_id, "node": self.node,
                    "known": sorted(st.peers), "applied-index": self.raft.applied_index(),
                    "starting": not self.svc.lease.registered.is_set(),
                    "has-data": self.svc.had_data or bool(st.cluster_id)}

    def artifact_file(self, artifact_id: str) -> Optional[str]:
        from jm.cluster.blobs import BlobError
        with self.raft.read() as st:
            art = st.artifacts.get(artifact_id)
        if art is None:
            return None
        try:
            return self.svc.blobs.local_path(artifact_id, art.name)
        except BlobError:
            return None

    # ---- logs ---------------------------------------------------------------------------
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
            url = self.svc.url_of(peer.host, peer.rest_port) if peer else None
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
            answer = await self.svc.peer_client.call(
                "GET", f"{url}/jobs/{job_id}/logs", 10.0, params=query,
                min_index=self.raft.applied_index())
        except PeerUnreachable as exc:
            raise ApiError(503, f"the logs of attempt {attempt} are on peer {rec.node}, "
                                f"which did not answer: {exc}", headers={"Retry-After": "1"})
        if answer.status != 200:
            raise ApiError(answer.status if answer.status in (400, 401, 404) else 503,
                           *answer.errors(), headers={"Retry-After": answer.retry_after or "1"})
        return answer.body

    async def livy_log(self, job_id: str, start: Optional[int], size: Optional[int]) -> dict:
        """A batch's log lines, Livy's way (the last 100 by default)."""
        try:
            text = (await self.job_logs(job_id, None, 0, None, False)).get("text") or ""
        except ApiError as exc:
            if exc.status != 404:  # 404: it has not run yet, no log
                raise
            text = ""
        first, total, lines = livy.log_page(text, start, size)
        return {"from": first, "total": total, "log": lines}

    # ---- the peer's own health ----------------------------------------------------------
    def gauges(self) -> dict:
        """Prometheus gauges, read at scrape time (jm/cluster/metrics.py)."""
        from jm.cluster.metrics import peer_gauges
        return peer_gauges(self.svc, self._leader())

    def readiness(self) -> dict:
        registered = self.svc.lease.registered.is_set()
        lease = self.svc.lease.valid()
        started = self.svc.started()
        why = [w for w, bad in (("not started", not started), ("not registered", not registered),
                                ("lease not valid", not lease)) if bad]
        return {"ready": not why, "node": self.node, "registered": registered,
                "lease-valid": lease, "started": started, "reasons": why}

    def health(self) -> dict:
        leader = self._leader()
        disk = self.raft.disk_trouble()
        registered = self.svc.lease.registered.is_set()
        try:
            st = os.statvfs(self.svc.data_dir)
            free: Optional[int] = st.f_bavail * st.f_frsize
        except OSError:
            free = None
        spark, engines = self.svc.spark, self.svc.engines
        out = {"ok": leader is not None and registered and disk is None,
               "node": self.node, "leader": leader, "registered": registered,
               # (at share-level tenant or job, engines start with their work)
               "spark-ready": bool(spark.ready.is_set() if spark is not None
                                   else engines is not None and engines.embedded),
               "spark-remote": _no_token(self.svc.spark_remote()), "disk-problem": disk,
               "disk-free": free}
        if engines is not None and engines.embedded:
            out["share-level"] = engines.level.value
            out["engines"] = engines.rows()
        return out


def _no_token(remote: Optional[str]) -> Optional[str]:
    """A Spark Connect URL as it may be shown: its `token` parameter hidden."""
    return remote and re.sub(r";token=[^;]*", ";token=(hidden)", remote)


def _job_detail(job: Any, now: float) -> dict:
    """A job's details, with a streaming job's last progress (issue 31)."""
    out = views.job_detail(job, now)
    progress = progress_view(getattr(job, "progress", None))
    if progress is not None:
        out["progress"] = progress
    return out
