"""A SQL gateway session's dependencies on the peer that holds it (jm/policy/sql/sessiondeps.py
says which): its artifacts fetched here (copies handed to the OS user of the process that
reads them, when that is not the peer's), its Python environment taken from the peer's
cache (jm/cluster/jobs/envs.py); both kept until the session leaves this peer.

The SQL worker adds the files to the session's Spark Connect session (so its SQL, its
Livy code and their UDFs see them) and gives the session the environment's interpreter for
its UDFs; a Livy session's Python process runs in that interpreter, its Python modules on
its path."""
from __future__ import annotations

import asyncio
import os
import pwd
import shutil
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional

from jm.cluster.jobs.jobpython import JobPython
from jm.policy.sql.sessiondeps import SessionDeps
from jm.policy.jobs.submitopts import split_alias
from jm.runtime.confine import hand_over, passable


@dataclass(frozen=True)
class ShippedDeps:
    """A session's dependencies as one process on this peer reads them."""
    artifacts: tuple = ()          # (kind, local path or path#alias): addArtifacts' input
    pyfiles: tuple = ()            # its Python modules' local paths (a Livy process's path)
    python: Optional[str] = None   # its environment's interpreter (None: the peer's)


class SessionDepsHolder:
    def __init__(self, resolve: Callable[[list[str]], Awaitable[list[str]]], envs: Any,
                 root: str) -> None:
        self.resolve = resolve  # artifact refs -> this peer's copies (fetched if need be)
        self.envs = envs        # EnvCache (None: this peer builds no environments)
        self.root = root        # <data dir>/session-files: copies handed to users
        self._pythons: dict[str, JobPython] = {}
        self._shipped: dict[tuple[str, Optional[str]], ShippedDeps] = {}

    async def prepare(self, handle: str, deps: SessionDeps, user: Optional[str]
                      ) -> ShippedDeps:
        """Session `handle`'s dependencies for a process running as `user` (None: the
        peer's): fetched, handed over and built once per session and user. EnvBuildError
        (pip's error) when its environment cannot be built; LookupError or OSError when an
        artifact cannot be had."""
        if not deps:
            return ShippedDeps()
        done = self._shipped.get((handle, user))
        if done is not None:
            return done
        python = None
        if deps.requirements:
            holder = self._pythons.get(handle)
            if holder is None:
                holder = self._pythons[handle] = JobPython(self.envs, list(deps.requirements))
            python = (await holder.acquire()).python
        refs = deps.refs()
        local = dict(zip(refs, await self.resolve(refs))) if refs else {}
        if user is not None and local:
            local = await asyncio.to_thread(self._hand_over, handle, user, local)
        artifacts, pyfiles = [], []
        for kind, entry in deps.files:
            ref, alias = split_alias(entry)
            path = local.get(ref, ref)
            artifacts.append((kind, path if alias is None else f"{path}#{alias}"))
            if kind == "pyfile":
                pyfiles.append(path)
        shipped = ShippedDeps(tuple(artifacts), tuple(pyfiles), python)
        self._shipped[(handle, user)] = shipped
        return shipped

    def _hand_over(self, handle: str, user: str, local: dict) -> dict:
        """Copies of the peer's files `local` (ref -> path) that `user` owns and reads."""
        entry = pwd.getpwnam(user)
        folder = os.path.join(self.root, handle)
        os.makedirs(folder, exist_ok=True)
        passable(os.path.dirname(self.root))  # (the peer's data dir: passed, not listed)
        passable(self.root)
        passable(folder)
        copies = hand_over(tuple(local.values()), folder, entry.pw_uid, entry.pw_gid)
        return {ref: copies[path] for ref, path in local.items()}

    def release(self, handle: str) -> None:
        """The session left this peer (closed, moved): its environment is given back and
        the copies made for it are deleted."""
        holder = self._pythons.pop(handle, None)
        if holder is not None:
            holder.release()
        if any(h == handle for h, _ in self._shipped):
            self._shipped = {k: v for k, v in self._shipped.items() if k[0] != handle}
            shutil.rmtree(os.path.join(self.root, handle), ignore_errors=True)
