"""Tenants on a peer: which job, batch, session or artifact a caller may see (the REST
layer answers 404 for another tenant's, as for one that does not exist) and the tenants'
quotas (`PUT /tenants/{t}`, `GET /tenants`, `jm tenant`). The quotas are kept by
raft/tenants.py (sessions) and the ResourceManager's placement (slots, jm/policy/members/quota.py).
The audit log is jm/cluster/api/auditapi.py's."""
from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Optional

from jm.api import ApiError, Credential, Named
from jm.cluster.api.apiwrites import Writes, api_errors
from jm.cluster.members.resourcemanager import tenant_usage
from jm.configvalues import parse_memory
from jm.policy.jobs import fsuri
from jm.policy.members import quota
from raft import tenants as T
from raft.commands import SetTenant
from raft.records import TERMINAL

if TYPE_CHECKING:
    from raft.node import RaftHost


def int_or_none(raw: Any) -> Optional[int]:
    """A path's or query's number, None for text that is none."""
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


class Tenants:
    def __init__(self, raft: "RaftHost", writes: Writes) -> None:
        self.raft, self.writes = raft, writes

    def visible(self, named: Named, value: str, who: Credential) -> Optional[bool]:
        """Whether `who` may see the object a path names; None when this replica does not
        know it (not yet, or never)."""
        with self.raft.read() as st:
            if named is Named.ARTIFACT:
                art = st.artifacts.get(value)
                if art is None:
                    return None
                return who.sees_all or T.key(who.tenant) in art.tenants
            rec = {Named.JOB: lambda: st.jobs.get(value),
                   Named.BATCH: lambda: st.jobs.get(st.by_number.get(int_or_none(value), "")),
                   Named.LIVY_SESSION: lambda: st.sessions.get(
                       st.livy_ids.get(int_or_none(value), "")),
                   Named.SQL_SESSION: lambda: st.sessions.get(value),
                   Named.PIPELINE: lambda: st.pipelines.get(value)}[named]()
            return None if rec is None else who.may_see(rec.tenant)

    # ---- quotas ----------------------------------------------------------------------
    @api_errors
    async def set(self, name: str, body: Any) -> dict:
        if not isinstance(body, dict) or not body or set(body) - {
                "slots", "sessions", "os-user", "memory", "cpu", "proxy-users",
                "savepoint-dirs"}:
            raise ApiError(400, 'the body is {"slots": N, "sessions": M, "os-user": U, '
                                '"memory": "4 gb", "cpu": W, "proxy-users": [U, ...], '
                                '"savepoint-dirs": [DIR, ...]} (any of them; 0: no limit, '
                                '"": no user, []: none)')
        proxies = body.get("proxy-users")
        if proxies is not None and (not isinstance(proxies, list)
                                    or not all(isinstance(u, str) for u in proxies)):
            raise ApiError(400, "proxy-users must be a list of user names ([]: none)")
        dirs = body.get("savepoint-dirs")
        if dirs is not None:
            if not isinstance(dirs, list):
                raise ApiError(400, "savepoint-dirs must be a list of directories ([]: none)")
            try:  # "/a", "file:///a/", "s3a://bucket/a" ... -> one canonical spelling
                dirs = tuple(fsuri.location(d, "savepoint-dirs") for d in dirs)
            except ValueError as exc:
                raise ApiError(400, str(exc))
        memory = body.get("memory")
        if memory is not None:
            try:
                memory = parse_memory(memory)
            except ValueError as exc:
                raise ApiError(400, f"memory: {exc}")
        user = body.get("os-user")
        if user is not None and not isinstance(user, str):
            raise ApiError(400, "os-user must be a user name, or \"\" for none")
        if user and os.geteuid() != 0:
            raise ApiError(409, f"os-user: this peer runs as uid {os.geteuid()}, not root: it "
                                "cannot run a tenant's work as another user (run the peers as "
                                "root, or use jobmanager.executor.user for every job)")
        await self.writes.write(SetTenant(name, body.get("slots"), body.get("sessions"),
                                          time.time(), user, memory, body.get("cpu"),
                                          None if proxies is None else tuple(proxies), dirs))
        return self._tenant_rows([name])[0]

    def list(self, who: Credential) -> dict:
        with self.raft.read() as st:
            names = set(st.tenants)
            names.update(T.key(j.tenant) for owned in st.assigned.values()
                         for j in (st.jobs[i] for i in owned))
            names.update(T.key(s.tenant) for s in st.sessions.values())
        if not who.sees_all:
            names = {T.key(who.tenant)}
        return {"tenants": self._tenant_rows(sorted(names))}

    def _tenant_rows(self, names: list) -> list:
        with self.raft.read() as st:
            used = tenant_usage(st)
            quotas = {n: t.slots for n, t in st.tenants.items()}
            waiting: dict[str, int] = {}
            for job_id in st.pending:
                job = st.jobs[job_id]
                if job.node is None and job.status not in TERMINAL:
                    k = T.key(job.tenant)
                    if quota.waiting_reason(job.tenant, job.slots, quotas, used):
                        waiting[k] = waiting.get(k, 0) + 1
            rows = []
            for name in names:
                rec = st.tenants.get(name)
                rows.append({"name": name, "slots": rec.slots if rec else 0,
                             "sessions": rec.sessions if rec else 0,
                             "slots-used": used.get(name, 0),
                             "sessions-open": T.sessions_held(
                                 st, None if name == T.DEFAULT else name),
                             "jobs-over-quota": waiting.get(name, 0),
                             **_runtime_row(T.runtime(st, None if name == T.DEFAULT
                                                      else name)),
                             "proxy-users": list(T.proxy_users(
                                 st, None if name == T.DEFAULT else name)),
                             "savepoint-dirs": list(T.savepoint_dirs(
                                 st, None if name == T.DEFAULT else name))})
            return rows

    def quota_reason(self, job_id: str) -> Optional[str]:
        """Why a waiting job is not placed, when its tenant's slot quota holds it."""
        with self.raft.read() as st:
            job = st.jobs.get(job_id)
            rec = st.tenants.get(T.key(job.tenant)) if job is not None else None
            if rec is None or rec.slots <= 0 or job.node is not None \
                    or job.status in TERMINAL:
                return None
            return quota.waiting_reason(job.tenant, job.slots,
                                        {rec.name: rec.slots}, tenant_usage(st))


def _runtime_row(rt: T.TenantRuntime) -> dict:
    """A tenant's row: how its work runs (its OS user; its engines' memory and CPU)."""
    return {"os-user": rt.os_user, "memory": rt.memory or None, "cpu": rt.cpu or None}
