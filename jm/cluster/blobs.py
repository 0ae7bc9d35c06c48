"""Content-addressed artifact store. A blob lives at <dir>/<sha256 hex>/<safe name>;
the name a client sends is reduced to a safe base name and never used as a path
(the CVE-2020-17518 pattern cannot write outside the store). Peers that lack a blob
fetch it from a peer that has it, over REST, and check its hash."""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
from typing import Optional

from jm.cluster.peerclient import PeerClient, PeerUnreachable

SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]")
TMP_PREFIX = ".upload-"  # a file being written (jm/policy/jobs/cleanup.py TEMP_NAME)


class BlobError(ValueError):
    pass


def safe_name(filename: str) -> str:
    """The base name of `filename`, restricted to safe characters and 160 of them (code:
    .py, .zip, .egg; or what spark-submit ships: jars, files, archives)."""
    base = os.path.basename(filename.replace("\\", "/")).strip()
    base = SAFE_NAME.sub("_", base).lstrip(".")
    if not base:
        raise BlobError(f"artifact file name {filename!r} has no name of a file")
    stem, dot, suffix = base.rpartition(".")
    return (stem[:120] + dot + suffix[:40]) if dot else base[:160]


def newest_mtime(folder: str) -> float | None:
    """The newest modification time of `folder` and the entries directly in it (None if
    it is gone)."""
    try:
        best = os.stat(folder).st_mtime
        with os.scandir(folder) as it:
            for e in it:
                try:
                    best = max(best, e.stat(follow_symlinks=False).st_mtime)
                except OSError:
                    pass
    except OSError:
        return None
    return best


class BlobStore:
    def __init__(self, directory: str) -> None:
        self.dir = directory
        os.makedirs(directory, exist_ok=True)

    def _folder(self, digest: str) -> str:
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise BlobError(f"bad artifact digest {digest!r}")
        return os.path.join(self.dir, digest)

    def put(self, filename: str, data: bytes, durable: bool = False) -> tuple[str, str]:
        """Store bytes; return (artifact id 'sha256:<hex>', stored name). `durable`: on
        disk (file and directories fsynced) when this returns."""
        name = safe_name(filename)
        digest = hashlib.sha256(data).hexdigest()
        folder = self._folder(digest)
        os.makedirs(folder, exist_ok=True)
        target = os.path.join(folder, name)
        if not os.path.exists(target):
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=TMP_PREFIX, suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    if durable:
                        f.flush()
                        os.fsync(f.fileno())
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
            if durable:
                for d in (folder, self.dir):
                    dfd = os.open(d, os.O_RDONLY)
                    try:
                        os.fsync(dfd)
                    finally:
                        os.close(dfd)
        else:  # given again: young again (the janitor spares blobs in their grace period)
            try:
                os.utime(target)
            except OSError:
                pass
        return f"sha256:{digest}", name

    def entries(self) -> list[tuple[str, float]]:
        """(digest, newest mtime of its folder and files) of every blob folder."""
        out = []
        try:
            names = os.listdir(self.dir)
        except OSError:
            return out
        for digest in names:
            if re.fullmatch(r"[0-9a-f]{64}", digest):
                mtime = newest_mtime(os.path.join(self.dir, digest))
                if mtime is not None:
                    out.append((digest, mtime))
        return out

    def temps(self) -> list[tuple[str, float]]:
        """(path, mtime) of the temporary files in the blob folders (a crash during a put
        leaves one; the janitor deletes the old ones)."""
        out = []
        for digest, _ in self.entries():
            folder = os.path.join(self.dir, digest)
            with contextlib.suppress(OSError):
                for name in os.listdir(folder):
                    if name.startswith(TMP_PREFIX):
                        with contextlib.suppress(OSError):
                            out.append((os.path.join(folder, name),
                                        os.lstat(os.path.join(folder, name)).st_mtime))
        return out

    def remove(self, digest: str) -> None:
        """Delete a blob's folder (the janitor decided no job needs it)."""
        shutil.rmtree(self._folder(digest), ignore_errors=True)

    def local_path(self, artifact_id: str, name: str) -> Optional[str]:
        digest = artifact_id.split(":", 1)[-1]
        path = os.path.join(self._folder(digest), safe_name(name))
        return path if os.path.exists(path) else None

    async def fetch(self, artifact_id: str, name: str, urls: list[str],
                    client: PeerClient, timeout: float = 60.0) -> str:
        """Get a blob from the first peer that serves it; verify its hash."""
        digest = artifact_id.split(":", 1)[-1]
        errors = []
        for url in urls:
            try:
                answer = await client.read(f"{url}/artifacts/{artifact_id}/content", timeout)
            except PeerUnreachable as exc:
                errors.append(f"{url}: {exc}")
                continue
            if answer.status != 200:
                errors.append(f"{url}: HTTP {answer.status}")
                continue
            if hashlib.sha256(answer.body).hexdigest() != digest:
                errors.append(f"{url}: content does not match {artifact_id}")
                continue
            self.put(name, answer.body)
            return self.local_path(artifact_id, name)
        raise LookupError(f"artifact {artifact_id} could not be fetched: "
                          f"{'; '.join(errors) or 'no peer has it'}")
