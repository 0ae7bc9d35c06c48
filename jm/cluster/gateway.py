"""The REST gateway of a peer: what `rest/` may ask of it (the `Gateway` protocol in
rest/gateway.py), answered from the local replica or written through Raft.

Reads come from this peer's replica (jm/cluster/reads.py); writes are Raft commands
acknowledged once applied here (jobs, savepoints, artifacts here; membership in
jm/cluster/clusterapi.py). Failures leave as `ApiError`s with their HTTP status: a bad
spec is 400, no leader or an unknown outcome is 503 with Retry-After (RaftUnavailable).
The gateway works with the services the peer hands it (jm/cluster/services.py)."""
from __future__ import annotations

import asyncio
import hashlib
import math
import os
import time
import zipfile
from typing import Any, Optional

from jm.cluster import remotefs
from jm.cluster.blobs import BlobError, safe_name
from jm.cluster.clusterapi import ClusterWrites
from jm.cluster.reads import PeerReads, api_errors
from jm.cluster.savepoint import SavepointError, read_metadata
from jm.cluster.pipelines import PipelineWrites
from jm.cluster.tenancy import TenantAccess, tenant_for
from jm.cluster.tokens import TokenWrites
from jm.policy import fsuri
from jm.policy.spec import SpecLimits, proxy_refusal, remote_refs, validate_spec
from jm.policy.submitopts import artifact_refs
from jm.wire import livy
from raft.artifacts import named_by
from raft.commands import AddArtifact, CancelJob, ForgetArtifacts, SubmitJob, TriggerSavepoint
from raft.tenants import key as tenant_key, proxy_users as tenant_proxy_users, \
    savepoint_dirs as tenant_savepoint_dirs
from rest.gateway import ANYONE, ApiError, Credential


REMOTE_CHECK_TIMEOUT = 15.0  # seconds to open a remote file system or read a savepoint
REMOTE_FETCH_TIMEOUT = 120.0  # seconds to copy a job's remote application or py-file


class PeerGateway(PeerReads, ClusterWrites, TokenWrites, TenantAccess, PipelineWrites):
    """Implements rest.gateway.Gateway for one peer (the peer's parts are read through
    its services, never changed, except by committing commands)."""

    def _max_slots(self) -> int:
        with self.raft.read() as st:
            return max([p.slots for p in st.peers.values()] + [self.conf["jobmanager.slots"]])

    @api_errors
    async def submit_job(self, spec: Any, request_id: str, names: Optional[dict] = None,
                         who: Credential = ANYONE) -> dict:
        """`names`: what the client calls the spec's fields, for its errors (Livy's);
        `who`: the caller (the job's tenant and submitter)."""
        spec, tenant = self._owned_spec(spec, names, who)
        self._writable()
        request_id = tenant_request_id(tenant, request_id)
        if request_id:  # a retry of a request this replica applied: its job, nothing read again
            with self.raft.read() as st:
                known = st.request_ids.get(request_id)
            if known is not None:
                return {"jobid": known}
        await self._check_spec(spec, names, who)
        res = await self.svc.submitter.submit(SubmitJob(spec["jobid"], spec, time.time(),
                                                        request_id, tenant, who.name))
        if not res.ok:
            raise ApiError(409 if res.code in ("exists", "protocol") else 400, res.error)
        return {"jobid": res.value["jobid"]}

    def _owned_spec(self, spec: Any, names: Optional[dict], who: Credential
                    ) -> tuple[dict, Optional[str]]:
        """The validated spec with its tenant (the caller's, jm/cluster/tenancy.py) and a
        proxy user the policy allows (else 403)."""
        spec = validate_spec(spec, self._max_slots(), SpecLimits.from_conf(self.conf))
        tenant = tenant_for(who, spec.pop("tenant", None))
        if tenant is not None:
            spec["tenant"] = tenant
        if spec.get("proxy-user"):
            self._check_proxy_user(spec["proxy-user"], (names or {}).get("proxy-user",
                                                                         "proxy-user"), tenant)
        return spec, tenant

    async def _check_spec(self, spec: dict, names: Optional[dict], who: Credential) -> None:
        """What a spec names must be there: remote files are copied into artifacts (the
        spec then names those), a script readable, artifacts known, a savepoint readable."""
        for field, uri in remote_refs(spec):  # copied once, as spark-submit downloads them
            ref = await self._remote_artifact((names or {}).get(field, field), uri, who)
            if spec.get("script") == uri:
                spec["script"] = ref
            spec["pyfiles"] = [ref if p == uri else p for p in spec["pyfiles"]]
        script = spec.get("script")
        if script and not script.startswith("artifact:"):
            problem = await asyncio.to_thread(script_problem, script)
            if problem:
                raise ApiError(400, f"script: {problem}")
        await self._known_artifacts([("pyfiles", p) for p in spec["pyfiles"]]
                                    + ([("script", script)] if script else [])
                                    + [("spark-conf", r) for r in
                                       artifact_refs(spec.get("spark-conf") or {})])
        if spec.get("savepoint-path"):
            await self._savepoint_place(spec["savepoint-path"], "savepoint-path", who)
            await self._check_location(spec["savepoint-path"], "savepoint-path")
            try:
                meta = await asyncio.wait_for(asyncio.to_thread(
                    read_metadata, spec["savepoint-path"], remotefs.options(self.conf)),
                    REMOTE_CHECK_TIMEOUT)
            except SavepointError as exc:
                raise ApiError(400, f"savepoint-path: {exc}")
            except asyncio.TimeoutError:
                raise ApiError(400, f"savepoint-path: {spec['savepoint-path']} could not be "
                                    f"read within {REMOTE_CHECK_TIMEOUT:.0f} s")
            if not who.sees_all and not self._savepoint_of(meta, who):
                raise ApiError(403, f"savepoint-path: {spec['savepoint-path']} is not a "
                                    f"savepoint of tenant {who.tenant}'s jobs")

    async def _savepoint_place(self, loc: str, field: str, who: Credential) -> None:
        """403 unless a tenant's savepoint is read or written under state.savepoints.dir
        (written by the peers only) or a directory granted to its tenant: elsewhere the
        peer (often root) would read or write any place on its host for it."""
        if who.sees_all:
            return
        with self.raft.read() as st:
            granted = tenant_savepoint_dirs(st, who.tenant)
        roots = [fsuri.location(self.conf.savepoints_dir(), "state.savepoints.dir"),
                 *granted]

        def real(place: str) -> str:  # (a link below a granted directory leads elsewhere)
            return place if fsuri.is_remote(place) else os.path.realpath(place)
        where = await asyncio.to_thread(lambda: (real(loc), [real(r) for r in roots]))
        if not fsuri.within(*where):
            tenant = tenant_key(who.tenant)
            raise ApiError(403, f"{field}: {loc} is neither under state.savepoints.dir nor "
                                f"under a savepoint directory granted to tenant {tenant} "
                                f"(an admin's PUT /tenants/{tenant} savepoint-dirs)")

    def _savepoint_of(self, meta: dict, who: Credential) -> bool:
        """Whether a savepoint (its _metadata) is of a job of `who`'s tenant: the tenant
        it records, or (one written before savepoints recorded it) the tenant of the job
        it names, while that job is in the job store."""
        if "tenant" in meta:
            return meta["tenant"] == who.tenant
        with self.raft.read() as st:
            job = st.jobs.get(str(meta.get("job-id")))
            return job is not None and job.tenant == who.tenant

    async def _known_artifacts(self, refs: list[tuple[str, str]]) -> None:
        """400 unless every `artifact:` reference (field, ref) is known. An id this replica
        does not know yet may have been acknowledged by another peer a moment ago: one
        barrier through the log settles it before the answer is no."""
        def missing() -> list[tuple[str, str]]:
            with self.raft.read() as st:
                return [(f, p) for f, p in refs
                        if p.startswith("artifact:") and p[len("artifact:"):] not in st.artifacts]
        if missing():
            await self.raft.barrier(self.conf["rest.write-timeout"])
            unknown = missing()
            if unknown:
                raise ApiError(400, *(f"{f}: unknown artifact {p}; upload it with "
                                      "POST /artifacts first" for f, p in unknown))
        removed = await asyncio.to_thread(self._removed_artifacts, refs)
        if removed:
            raise ApiError(400, *(f"{f}: artifact {p} was removed (no job referred to it "
                                  "for jobmanager.blob.grace-period); upload it again with "
                                  "POST /artifacts" for f, p in removed))

    def _removed_artifacts(self, refs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The known artifacts of `refs` whose content is gone from this peer and from the
        shared copy (the janitor removes unreferenced blobs after their grace period)."""
        with self.raft.read() as st:
            known = {p: st.artifacts.get(p[len("artifact:"):]) for _, p in refs
                     if p.startswith("artifact:")}
        return [(f, p) for f, p in refs if known.get(p) is not None
                and self.svc.blobs.local_path(known[p].id, known[p].name) is None
                and self.svc.shared_blobs.local_path(known[p].id, known[p].name) is None]

    @api_errors
    async def cancel_job(self, job_id: str) -> str:
        return await self._write(CancelJob(job_id, time.time()))

    async def _check_location(self, loc: str, field: str) -> None:
        """400 unless this peer can open the remote file system of `loc` (pyarrow.fs with
        the peer's s3.* settings; hdfs:// needs a Hadoop client)."""
        if not fsuri.is_remote(loc):
            return
        try:
            problem = await asyncio.wait_for(asyncio.to_thread(
                remotefs.problem, loc, remotefs.options(self.conf)), REMOTE_CHECK_TIMEOUT)
        except asyncio.TimeoutError:
            problem = f"its file system did not open within {REMOTE_CHECK_TIMEOUT:.0f} s"
        if problem:
            raise ApiError(400, f"{field} {loc}: {problem}")

    @api_errors
    async def trigger_savepoint(self, job_id: str, trigger_id: str, target: Optional[str],
                                stop: bool, who: Credential = ANYONE) -> dict:
        if target is not None:
            try:  # "/a", "file:///a", "s3a://bucket/a" ... -> one canonical spelling
                target = fsuri.location(target, "target-directory")
            except ValueError as exc:
                raise ApiError(400, str(exc))
            await self._savepoint_place(target, "target-directory", who)
            await self._check_location(target, "target-directory")
        out = await self._write(TriggerSavepoint(job_id, trigger_id, target, stop, time.time()))
        return {"request-id": out["request-id"]}

    def _check_proxy_user(self, user: str, field: str, tenant: Optional[str]) -> None:
        """403 unless jobmanager.executor.proxy-users and the job's tenant (its
        proxy-users) let its jobs run as `user`."""
        with self.raft.read() as st:
            granted = tenant_proxy_users(st, tenant)
        refused = proxy_refusal(user, self.conf["jobmanager.executor.proxy-users"], field,
                                tenant=tenant, tenant_users=granted)
        if refused:
            raise ApiError(403, refused)

    async def livy_submit(self, body: Any, request_id: str, who: Credential = ANYONE
                          ) -> dict:
        """POST /batches: a Livy batch request as a script job (jm/wire/livy.py)."""
        try:
            spec = livy.batch_spec(body)
        except ValueError as exc:
            raise ApiError(400, *exc.args[0])
        out = await self.submit_job(spec, request_id, livy.FIELD_NAMES, who)
        with self.raft.read() as st:
            job = st.jobs.get(out["jobid"])
            if job is None:  # applied here before the answer: never; purged at once: gone
                raise ApiError(404, f"batch of job {out['jobid']} is gone already")
            return livy.batch(job)

    async def _remote_artifact(self, field: str, uri: str, who: Credential) -> str:
        """A remote file (s3://, gs://, hdfs://) copied into the cluster's artifacts ->
        `artifact:<id>`; 400 if it cannot be read, 413 beyond rest.max-body-size."""
        limit = self.conf["rest.max-body-size"]
        try:
            data = await asyncio.wait_for(asyncio.to_thread(
                remotefs.read_bytes, uri, remotefs.options(self.conf), limit),
                REMOTE_FETCH_TIMEOUT)
        except remotefs.TooLarge as exc:
            raise ApiError(413, f"{field}: {exc}")
        except remotefs.RemoteError as exc:
            raise ApiError(400, f"{field}: {exc}")
        except asyncio.TimeoutError:
            raise ApiError(400, f"{field} {uri} could not be read within "
                                f"{REMOTE_FETCH_TIMEOUT:.0f} s")
        art = await self.add_artifact(uri.rsplit("/", 1)[-1], data, who)
        return art["pyfile"]

    @api_errors
    async def add_artifact(self, filename: str, data: bytes, who: Credential = ANYONE
                           ) -> dict:
        self._writable()
        tenant = tenant_key(tenant_for(who, None))
        try:
            name = safe_name(filename)
            art_id = "sha256:" + hashlib.sha256(data).hexdigest()
            with self.raft.read() as st:
                known = st.artifacts.get(art_id)
            # one name per content: keep the cluster's, so every peer imports it alike
            art_id, name = self.svc.blobs.put(known.name if known else name, data)
        except BlobError as exc:
            raise ApiError(400, str(exc))
        # acknowledged only once a second copy is on disk in the storage every peer shares
        # (high-availability.storageDir): a peer that loses its disk loses no artifact
        try:
            await asyncio.to_thread(self.svc.shared_blobs.put, name, data, True)
        except OSError as exc:
            raise ApiError(503, f"the artifact could not be stored in "
                                f"high-availability.storageDir: {exc}",
                           headers={"Retry-After": "1"})
        res = await self.raft.submit(AddArtifact(art_id, name, len(data), self.node,
                                                 time.time(), (tenant,), who.name),
                                     self.conf["rest.write-timeout"])
        if not res.ok:
            raise ApiError(400, res.error)
        return {"id": art_id, "name": name, "size": len(data), "pyfile": f"artifact:{art_id}"}

    @api_errors
    async def delete_artifact(self, artifact_id: str, who: Credential = ANYONE) -> dict:
        """Forget an artifact no job names (Flink's DELETE /jars/<id>): 404 unknown, 409
        named by a job. A tenant's caller takes back its tenant's claim only: another
        tenant that uploaded the same bytes keeps it, and only its own tenant's jobs keep
        it from going (409). Its files go as an unused upload's do (the janitor, after
        jobmanager.blob.grace-period), so an upload of the same bytes racing the delete
        keeps them."""
        self._writable()
        tenant = "" if who.sees_all else tenant_key(who.tenant)

        def naming() -> Optional[list[str]]:  # None: unknown (to this caller)
            with self.raft.read() as st:
                art = st.artifacts.get(artifact_id)
                if art is None or (tenant and tenant not in art.tenants):
                    return None
                return [j.id for j in st.jobs.values() if artifact_id in named_by(j.spec)
                        and (not tenant or who.may_see(j.tenant))]
        jobs = naming()
        if jobs is None:
            await self.raft.barrier(self.conf["rest.write-timeout"])
            jobs = naming()
            if jobs is None:
                raise ApiError(404, f"unknown artifact {artifact_id}")
        if not jobs:
            # (below protocol 5, RaftHost.submit refuses a tenant's claim: ProtocolRefused, 409)
            res = await self.raft.submit(ForgetArtifacts((artifact_id,), math.inf, time.time(),
                                                         tenant),
                                         self.conf["rest.write-timeout"])
            if res.ok and res.value:
                return {}
            jobs = naming()  # meanwhile: named by a new job, or forgotten by another delete
            if jobs is None:
                raise ApiError(404, f"unknown artifact {artifact_id}")
        raise ApiError(409, f"artifact {artifact_id} is named by job(s) "
                            f"{', '.join(jobs[:5])}; it is kept while they are in the job store")


def script_problem(path: str) -> Optional[str]:
    """Why a script path given at submission cannot run (checked on the receiving peer;
    every peer must be able to read it), or None."""
    if not os.path.isfile(path):
        return f"{path} is not a file on the peer that received the job"
    if not os.access(path, os.R_OK):
        return f"{path} is not readable"
    if path.endswith(".zip"):
        try:
            with zipfile.ZipFile(path) as z:
                if "__main__.py" not in z.namelist():
                    return f"{path} has no __main__.py at its top level"
        except (OSError, zipfile.BadZipFile) as exc:
            return f"{path} is not a readable zip file: {exc}"
    return None


def tenant_request_id(tenant: Optional[str], request_id: str) -> str:
    """The key of a submission's X-Request-Id in the replicated state: a tenant's own
    (another tenant sending the same id makes a job of its own, and is never answered
    with this one's); the default tenant's as it was sent."""
    return f"{tenant}/{request_id}" if tenant and request_id else request_id
