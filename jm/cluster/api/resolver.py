"""What a submission names, checked and fetched before it is written (a job's, a
pipeline's): the spec parsed with its tenant and proxy user (`prepare`: the pure
jm/policy/api/submission.py with the state's limits); then `resolve`: remote files
copied into artifacts; a script readable; every artifact known and its bytes still kept;
a savepoint readable, in a place its tenant may use, and of its tenant's jobs."""
from __future__ import annotations

import asyncio
import os
import zipfile
from typing import TYPE_CHECKING, Any, Optional

from jm.api import ApiError, Credential
from jm.cluster.jobs import remotefs
from jm.cluster.api.apiwrites import Writes
from jm.cluster.jobs.savepoint import SavepointError, read_metadata
from jm.policy.api.submission import (Refused, Submission, SubmitLimits, prepare_submission,
                                      with_artifact)
from jm.policy.jobs import fsuri
from jm.policy.jobs.spec import SpecLimits
from jm.policy.jobs.submitopts import artifact_refs
from raft.jobspec import JobSpec
from raft.tenants import key as tenant_key, proxy_users as tenant_proxy_users, \
    savepoint_dirs as tenant_savepoint_dirs

if TYPE_CHECKING:
    from jm.cluster.api.artifactsapi import Artifacts
    from jm.config import Config
    from raft.node import RaftHost


REMOTE_CHECK_TIMEOUT = 15.0  # seconds to open a remote file system or read a savepoint
REMOTE_FETCH_TIMEOUT = 120.0  # seconds to copy a job's remote application or py-file


class SubmissionResolver:
    def __init__(self, conf: "Config", raft: "RaftHost", writes: Writes,
                 artifacts: "Artifacts") -> None:
        self.conf, self.raft, self.writes, self.artifacts = conf, raft, writes, artifacts
        self.spec_limits = SpecLimits.from_conf(conf)  # (the configuration does not change)

    def max_slots(self) -> int:
        with self.raft.read() as st:
            return max([p.slots for p in st.peers.values()] + [self.conf["jobmanager.slots"]])

    def prepare(self, raw: Any, names: Optional[dict], who: Credential) -> Submission:
        """`raw` parsed as a job of `who`'s tenant (jm/policy/api/submission.py), or the
        ApiError of its refusal (400, 403 for a tenant or proxy user not allowed, 413)."""
        out = prepare_submission(raw, who, SubmitLimits(
            self.spec_limits, self.max_slots(),
            self.conf.executor.proxy_users, self._proxy_users_of),
            names)
        if isinstance(out, Refused):
            raise ApiError(out.status, *out.errors)
        return out

    def _proxy_users_of(self, tenant: Optional[str]) -> tuple:
        with self.raft.read() as st:
            return tuple(tenant_proxy_users(st, tenant))

    async def resolve(self, sub: Submission, names: Optional[dict], who: Credential
                      ) -> JobSpec:
        """What a spec names must be there: remote files are copied into artifacts (the
        spec returned names those), a script readable, artifacts known, a savepoint
        readable."""
        spec = sub.spec
        for field, uri in sub.remote:  # copied once, as spark-submit downloads them
            ref = await self._remote_artifact((names or {}).get(field, field), uri, who)
            spec = with_artifact(spec, uri, ref)
        script = spec.script
        if script and not script.startswith("artifact:"):
            problem = await asyncio.to_thread(script_problem, script)
            if problem:
                raise ApiError(400, f"script: {problem}")
        await self._known_artifacts([("pyfiles", p) for p in spec.pyfiles]
                                    + ([("script", script)] if script else [])
                                    + [("spark-conf", r) for r in
                                       artifact_refs(spec.spark_conf or {})])
        if spec.savepoint_path:
            await self._check_savepoint(spec.savepoint_path, who)
        return spec

    async def _check_savepoint(self, path: str, who: Credential) -> None:
        """A savepoint to start from: in a place `who`'s tenant may read, readable, and
        of that tenant's jobs."""
        await self.savepoint_place(path, "savepoint-path", who)
        await self.check_location(path, "savepoint-path")
        try:
            meta = await asyncio.wait_for(asyncio.to_thread(
                read_metadata, path, remotefs.options(self.conf)), REMOTE_CHECK_TIMEOUT)
        except SavepointError as exc:
            raise ApiError(400, f"savepoint-path: {exc}")
        except asyncio.TimeoutError:
            raise ApiError(400, f"savepoint-path: {path} could not be read within "
                                f"{REMOTE_CHECK_TIMEOUT:.0f} s")
        if not who.sees_all and not self._savepoint_of(meta, who):
            raise ApiError(403, f"savepoint-path: {path} is not a savepoint of tenant "
                                f"{who.tenant}'s jobs")

    async def savepoint_place(self, loc: str, field: str, who: Credential) -> None:
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
        refs = [(f, p) for f, p in refs if p.startswith("artifact:")]
        if not refs:  # (most submissions: no thread hop for a look at the blob store)
            return

        def missing() -> list[tuple[str, str]]:
            with self.raft.read() as st:
                return [(f, p) for f, p in refs if p[len("artifact:"):] not in st.artifacts]
        if missing():
            await self.writes.barrier()
            unknown = missing()
            if unknown:
                raise ApiError(400, *(f"{f}: unknown artifact {p}; upload it with "
                                      "POST /artifacts first" for f, p in unknown))
        removed = await asyncio.to_thread(self.artifacts.removed, refs)
        if removed:
            raise ApiError(400, *(f"{f}: artifact {p} was removed (no job referred to it "
                                  "for jobmanager.blob.grace-period); upload it again with "
                                  "POST /artifacts" for f, p in removed))

    async def check_location(self, loc: str, field: str) -> None:
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
        art = await self.artifacts.add(uri.rsplit("/", 1)[-1], data, who)
        return art["pyfile"]


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
