"""A job's py-files and script as local paths: an uploaded artifact
(`artifact:sha256:...`) this peer does not hold yet is fetched from a peer that does
(hash checked), else read from high-availability.storageDir; this peer then holds a
copy others may fetch."""
from __future__ import annotations

import asyncio
import hashlib
import os
import time
from typing import Callable, Optional

from jm.cluster.blobs import BlobStore
from jm.cluster.peerclient import PeerClient
from raft.commands import AddArtifact
from raft.jobspec import JobSpec
from raft.node import RaftHost, RaftUnavailable


class ArtifactFetcher:
    def __init__(self, node: str, raft: RaftHost, blobs: BlobStore, shared: BlobStore,
                 client: PeerClient, url_of: Callable[[str, int], str],
                 write_timeout: float) -> None:
        self.node, self.raft = node, raft
        self.blobs, self.shared = blobs, shared
        self.peer_client, self.url_of = client, url_of
        self.write_timeout = write_timeout

    async def resolve_pyfiles(self, pyfiles: list[str]) -> list[str]:
        out = []
        for p in pyfiles:
            if not p.startswith("artifact:"):
                if not os.path.exists(p):
                    raise LookupError(f"pyfile {p} does not exist on peer {self.node}")
                out.append(p)
                continue
            art_id = p[len("artifact:"):]
            with self.raft.read() as st:
                art = st.artifacts.get(art_id)
                if art is None:
                    raise LookupError(f"unknown artifact {art_id}")
                name, holders = art.name, list(art.nodes)
                urls = [self.url_of(st.peers[n].host, st.peers[n].rest_port) for n in holders
                        if n in st.peers and n != self.node]
            path = self.blobs.local_path(art_id, name)
            if path is None:
                try:
                    path = await self.blobs.fetch(art_id, name, urls, self.peer_client)
                except LookupError:  # no peer that has it answers: the shared copy
                    path = await asyncio.to_thread(self._blob_from_shared, art_id, name)
                try:  # this peer holds a copy now: others may fetch it from here too
                    await self.raft.submit(AddArtifact(art_id, name, os.path.getsize(path),
                                                       self.node, time.time()),
                                           self.write_timeout)
                except RaftUnavailable:
                    pass
            out.append(path)
        return out

    def _blob_from_shared(self, art_id: str, name: str) -> str:
        """The artifact from high-availability.storageDir, its hash checked (LookupError)."""
        shared = self.shared.local_path(art_id, name)
        if shared is None:
            raise LookupError(f"artifact {art_id} is on no peer that answers and not in "
                              "high-availability.storageDir")
        with open(shared, "rb") as f:
            data = f.read()
        if "sha256:" + hashlib.sha256(data).hexdigest() != art_id:
            raise LookupError(f"the shared copy of artifact {art_id} is damaged")
        self.blobs.put(name, data)
        return self.blobs.local_path(art_id, name)


def missing_code(spec: JobSpec) -> Optional[str]:
    """The job's script or pyfile given as a local path that is not there (blocking)."""
    for path in [spec.script, *spec.pyfiles]:
        if path and not str(path).startswith("artifact:") and not os.path.exists(path):
            return str(path)
    return None
