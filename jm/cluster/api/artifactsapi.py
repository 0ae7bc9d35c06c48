"""Artifacts through a peer's REST gateway (POST/GET/DELETE /artifacts, Flink's jars):
uploaded bytes kept here and in high-availability.storageDir before the Raft command that
names them is written; a delete takes back a tenant's claim."""
from __future__ import annotations

import asyncio
import hashlib
import math
import time
from typing import TYPE_CHECKING, Optional

from jm.api import ANYONE, ApiError, Credential
from jm.cluster.api.apiwrites import Writes, api_errors
from jm.cluster.blobs import BlobError, safe_name
from jm.policy.api.tenancy import tenant_for
from raft.artifacts import named_by
from raft.commands import AddArtifact, ForgetArtifacts
from raft.tenants import key as tenant_key

if TYPE_CHECKING:
    from jm.cluster.blobs import BlobStore
    from raft.node import RaftHost


class Artifacts:
    def __init__(self, node: str, raft: "RaftHost", writes: Writes, blobs: "BlobStore",
                 shared_blobs: "BlobStore") -> None:
        self.node, self.raft, self.writes = node, raft, writes
        self.blobs = blobs                # this peer's artifacts
        self.shared_blobs = shared_blobs  # their copies in high-availability.storageDir

    def file(self, artifact_id: str) -> Optional[str]:
        with self.raft.read() as st:
            art = st.artifacts.get(artifact_id)
        if art is None:
            return None
        try:
            return self.blobs.local_path(artifact_id, art.name)
        except BlobError:
            return None

    @api_errors
    async def add(self, filename: str, data: bytes, who: Credential = ANYONE
                  ) -> dict:
        self.writes.writable()
        tenant = tenant_key(tenant_for(who, None))
        try:
            name = safe_name(filename)
            art_id = "sha256:" + hashlib.sha256(data).hexdigest()
            with self.raft.read() as st:
                known = st.artifacts.get(art_id)
            # one name per content: keep the cluster's, so every peer imports it alike
            art_id, name = self.blobs.put(known.name if known else name, data)
        except BlobError as exc:
            raise ApiError(400, str(exc))
        # acknowledged only once a second copy is on disk in the storage every peer shares
        # (high-availability.storageDir): a peer that loses its disk loses no artifact
        try:
            await asyncio.to_thread(self.shared_blobs.put, name, data, True)
        except OSError as exc:
            raise ApiError(503, f"the artifact could not be stored in "
                                f"high-availability.storageDir: {exc}",
                           headers={"Retry-After": "1"})
        res = await self.writes.submit(AddArtifact(art_id, name, len(data), self.node,
                                                   time.time(), (tenant,), who.name))
        if not res.ok:
            raise ApiError(400, res.error)
        return {"id": art_id, "name": name, "size": len(data), "pyfile": f"artifact:{art_id}"}

    @api_errors
    async def delete(self, artifact_id: str, who: Credential = ANYONE) -> dict:
        """Forget an artifact no job names (Flink's DELETE /jars/<id>): 404 unknown, 409
        named by a job. A tenant's caller takes back its tenant's claim only: another
        tenant that uploaded the same bytes keeps it, and only its own tenant's jobs keep
        it from going (409). Its files go as an unused upload's do (the janitor, after
        jobmanager.blob.grace-period), so an upload of the same bytes racing the delete
        keeps them."""
        self.writes.writable()
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
            await self.writes.barrier()
            jobs = naming()
            if jobs is None:
                raise ApiError(404, f"unknown artifact {artifact_id}")
        if not jobs:
            # (below protocol 5, RaftHost.submit refuses a tenant's claim: ProtocolRefused, 409)
            res = await self.writes.submit(ForgetArtifacts((artifact_id,), math.inf, time.time(),
                                                           tenant))
            if res.ok and res.value:
                return {}
            jobs = naming()  # meanwhile: named by a new job, or forgotten by another delete
            if jobs is None:
                raise ApiError(404, f"unknown artifact {artifact_id}")
        raise ApiError(409, f"artifact {artifact_id} is named by job(s) "
                            f"{', '.join(jobs[:5])}; it is kept while they are in the job store")

    def removed(self, refs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The known artifacts of `refs` whose content is gone from this peer and from the
        shared copy (the janitor removes unreferenced blobs after their grace period)."""
        with self.raft.read() as st:
            known = {p: st.artifacts.get(p[len("artifact:"):]) for _, p in refs
                     if p.startswith("artifact:")}
        return [(f, p) for f, p in refs if known.get(p) is not None
                and self.blobs.local_path(known[p].id, known[p].name) is None
                and self.shared_blobs.local_path(known[p].id, known[p].name) is None]

