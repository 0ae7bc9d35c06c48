"""The peer's cache of per-job Python environments (jm/policy/jobs/envs.py decides what a set
is and what makes room; this builds and keeps them).

An environment is a virtual environment under `<data dir>/envs/<key>` (key: the set and
the Python version) that layers over the peer's own: a `.pth` file adds the peer's
site-packages after the environment's, so pip installs only what the peer lacks or has
in another version, and pyspark, py4j and this project stay the peer's (a constraints
file pins pyspark and py4j to the peer's versions: a requirement that needs another one
fails its build with pip's error). It is built once per set: a job asking for a set being
built waits for that build. Built in its place (scripts name their environment's path)
and marked ready last, so a peer killed mid-build leaves nothing a job would use (the
next build of the set starts afresh). Readable by other users (jobs of tenants' OS users
import from it): built with umask 022.
"""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
import site
import sys
import tarfile
import time
from dataclasses import dataclass
from importlib import metadata
from typing import Callable, Optional

from jm.policy.jobs.envs import CachedEnv, RequirementSet, to_evict

log = logging.getLogger("jm.envs")

READY = ".jm-ready"       # in a finished environment: its requirements (mtime: last used)
PACKED = "jm-packed.tar.gz"  # in an environment shipped to a cluster's executors
PIP_LINES = 4             # lines of pip's error a failed build keeps
PEER_PINNED = ("pyspark", "py4j")


class EnvBuildError(Exception):
    """A set that pip could not resolve or install: pip's own error lines."""


@dataclass(frozen=True)
class PipOptions:
    index_url: Optional[str] = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    timeout: float = 600.0
    # a source distribution runs its own setup code when pip builds it, as the peer's
    # user (root where tenants run as their users): wheels only unless allowed
    source_builds: bool = False

    @staticmethod
    def from_conf(conf) -> "PipOptions":
        return PipOptions(conf["jobmanager.envs.index-url"],
                          tuple(conf["jobmanager.envs.extra-index-urls"]),
                          tuple(conf["jobmanager.envs.find-links"]),
                          conf["jobmanager.envs.build-timeout"],
                          conf["jobmanager.envs.source-builds"])

    def args(self) -> list[str]:
        out = [] if self.source_builds else ["--only-binary", ":all:"]
        out += ["--index-url", self.index_url] if self.index_url else []
        for url in self.extra_index_urls:
            out += ["--extra-index-url", url]
        for where in self.find_links:
            out += ["--find-links", where]
        return out


@dataclass(frozen=True)
class Env:
    key: str
    path: str     # the virtual environment
    python: str   # its interpreter (Spark's Python workers run it)
    site: str     # its site-packages (a job process puts it first on sys.path)


def python_version() -> str:
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def _site_of(path: str) -> str:
    return os.path.join(path, "lib", f"python{python_version()}", "site-packages")


def _env(root: str, key: str) -> Env:
    path = os.path.join(root, key)
    return Env(key, path, os.path.join(path, "bin", "python"), _site_of(path))


def dir_size(path: str) -> int:
    """Bytes of the files under `path`."""
    total = 0
    for top, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(top, name)).st_size
            except OSError:
                pass
    return total


class EnvCache:
    def __init__(self, root: str, max_size: int, pip: PipOptions = PipOptions(),
                 clock: Callable[[], float] = time.time) -> None:
        self.root, self.max_size, self.pip, self.clock = root, max_size, pip, clock
        self._builds: dict[str, asyncio.Future] = {}
        self._in_use: dict[str, int] = {}
        self._sizes: dict[str, int] = {}
        self._packs: dict[str, asyncio.Future] = {}  # archives being made, per key

    async def acquire(self, reqs: RequirementSet) -> Env:
        """The environment of `reqs`, built if the cache has none (EnvBuildError with
        pip's error when it cannot be); in use until `release`."""
        key = reqs.key(python_version())
        env = _env(self.root, key)
        self._in_use[key] = self._in_use.get(key, 0) + 1
        try:
            if not os.path.exists(os.path.join(env.path, READY)):
                build = self._builds.get(key)
                if build is None:
                    build = asyncio.ensure_future(self._build(key, reqs))
                    self._builds[key] = build
                    build.add_done_callback(lambda _f, k=key: self._builds.pop(k, None))
                await asyncio.shield(build)
            await asyncio.to_thread(self._touch, env)
        except BaseException:
            self.release(env)
            raise
        return env

    def release(self, env: Env) -> None:
        left = self._in_use.get(env.key, 0) - 1
        if left > 0:
            self._in_use[env.key] = left
        else:
            self._in_use.pop(env.key, None)

    def in_use(self, key: str) -> int:
        return self._in_use.get(key, 0)

    async def packed(self, env: Env) -> str:
        """Environment `env` (in use) as one archive, made once: what Spark unpacks in each
        executor's folder on a cluster (spark.archives `<it>#<alias>`, the workers'
        interpreter `./<alias>/bin/python`, Spark's documented way to ship a venv). Its
        interpreter links to the peer's base Python and its layer names the peer's
        site-packages: a worker host needs those paths (the peers' image)."""
        path = os.path.join(env.path, PACKED)
        if os.path.exists(path):
            return path
        build = self._packs.get(env.key)
        if build is None:
            build = asyncio.ensure_future(asyncio.to_thread(_pack, env.path, path))
            self._packs[env.key] = build
            build.add_done_callback(lambda _f, k=env.key: self._packs.pop(k, None))
        size = await asyncio.shield(build)
        if env.key in self._sizes:
            self._sizes[env.key] += size
        return path

    def _touch(self, env: Env) -> None:
        now = self.clock()
        os.utime(os.path.join(env.path, READY), (now, now))

    # ---- a build ------------------------------------------------------------------------
    async def _build(self, key: str, reqs: RequirementSet) -> None:
        path = os.path.join(self.root, key)
        await asyncio.to_thread(self._clear, path)
        started = time.monotonic()
        try:
            await self._run([sys.executable, "-m", "venv", "--without-pip", path], "venv")
            await asyncio.to_thread(self._layer, path, reqs)
            await self._run([sys.executable, "-m", "pip", "--python",
                             os.path.join(path, "bin", "python"), "install", "--no-input",
                             "--disable-pip-version-check", "--no-warn-script-location",
                             "-r", os.path.join(path, "requirements.txt"),
                             "-c", os.path.join(path, "constraints.txt"), *self.pip.args()],
                            "pip")
            await asyncio.to_thread(self._finish, path, key, reqs)
        except BaseException:
            await asyncio.to_thread(shutil.rmtree, path, True)
            raise
        log.info("Python environment %s built in %.1f s (%d MB): %s", key,
                 time.monotonic() - started, self._sizes.get(key, 0) >> 20,
                 ", ".join(reqs.requirements))
        await self.make_room(key)

    def _layer(self, path: str, reqs: RequirementSet) -> None:
        """The environment over the peer's: its site-packages last on the path (their .pth
        files read: an editable install of this project), pyspark and py4j pinned."""
        peer_sites = [p for p in site.getsitepackages() if os.path.isdir(p)]
        env_site = _site_of(path)
        os.makedirs(env_site, exist_ok=True)
        _write(os.path.join(env_site, "_jm_peer.pth"), "import site; " + "; ".join(
            f"site.addsitedir({p!r})" for p in peer_sites) + "\n")
        pins = []
        for name in PEER_PINNED:
            try:
                pins.append(f"{name}=={metadata.version(name)}\n")
            except metadata.PackageNotFoundError:
                pass
        _write(os.path.join(path, "constraints.txt"), "".join(pins))
        _write(os.path.join(path, "requirements.txt"), reqs.text())

    def _clear(self, path: str) -> None:
        """The cache's folder, and no unfinished build of a killed peer at `path`."""
        os.makedirs(self.root, exist_ok=True)
        os.chmod(self.root, 0o755)  # (its environments are read by jobs' users)
        shutil.rmtree(path, ignore_errors=True)

    def _finish(self, path: str, key: str, reqs: RequirementSet) -> None:
        self._sizes[key] = dir_size(path)
        _write(os.path.join(path, READY), reqs.text())  # last: ready from now on

    async def _run(self, argv: list[str], what: str) -> None:
        proc = await asyncio.create_subprocess_exec(  # (killed with the peer; umask 022)
            sys.executable, "-m", "jm.runtime.pdeathsig", *argv,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=dict(os.environ, PIP_NO_INPUT="1", PYTHONNOUSERSITE="1"))
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), self.pip.timeout)
        except asyncio.TimeoutError:
            proc.kill()
            await proc.wait()
            raise EnvBuildError(f"{what} did not finish within {self.pip.timeout:.0f} s "
                                "(jobmanager.envs.build-timeout)") from None
        if proc.returncode != 0:
            text = out.decode(errors="replace")
            log.warning("%s failed (exit %s); its output ends:\n%s", what, proc.returncode,
                        "\n".join(text.splitlines()[-40:]))
            raise EnvBuildError(pip_error(text, what))

    # ---- room -----------------------------------------------------------------------------
    def entries(self) -> list[CachedEnv]:
        out = []
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return out
        for name in names:
            ready = os.path.join(self.root, name, READY)
            try:
                used = os.stat(ready).st_mtime
            except OSError:
                continue
            size = self._sizes.get(name)
            if size is None:
                size = self._sizes[name] = dir_size(os.path.join(self.root, name))
            out.append(CachedEnv(name, size, used, 0))
        return out

    async def make_room(self, keep: Optional[str] = None) -> list[str]:
        """Delete the least recently used environments not in use (nor `keep`, just
        built) while the cache is over jobmanager.envs.max-size. Decided on the event
        loop, where `acquire` counts a use before it looks for the ready mark: a use
        counted is never deleted, and one deleted is never taken."""
        found = await asyncio.to_thread(self.entries)
        envs = [CachedEnv(e.key, e.size, e.last_used,
                          1 if e.key == keep else self.in_use(e.key)) for e in found]
        gone = []
        for key in to_evict(envs, self.max_size):
            try:
                os.unlink(os.path.join(self.root, key, READY))  # no job takes it from now
            except OSError:
                continue
            gone.append(key)
            self._sizes.pop(key, None)
            log.info("Python environment %s deleted: the cache was over "
                     "jobmanager.envs.max-size", key)
        for key in gone:
            await asyncio.to_thread(shutil.rmtree, os.path.join(self.root, key), True)
        return gone


def _pack(folder: str, path: str) -> int:
    """`folder` as a gzipped tar of its contents (links kept as links; the archive itself
    left out) at `path`, written whole or not at all: its size."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with tarfile.open(tmp, "w:gz", compresslevel=1) as tar:
            for name in sorted(os.listdir(folder)):
                if name != PACKED and not name.startswith(PACKED + "."):
                    tar.add(os.path.join(folder, name), arcname=name)
        os.chmod(tmp, 0o644)  # (read by the job's user's driver)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return os.path.getsize(path)


def _write(path: str, text: str) -> None:
    """A file of an environment: read by jobs' users, whatever the peer's umask."""
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o644)


def pip_error(output: str, what: str = "pip") -> str:
    """The lines of pip's output that say what failed (ERROR: ..., and the conflict a
    resolution ran into), else its last ones."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR:")][:PIP_LINES]
    if "The conflict is caused by:" in lines:
        causes = []
        for ln in lines[lines.index("The conflict is caused by:") + 1:]:
            if ln.startswith(("To fix", "ERROR:")) or len(causes) == PIP_LINES:
                break
            causes.append(ln)
        errors = errors[:1] + causes
    if "ERROR: Exception:" in errors and lines:  # pip's own crash: its exception's line
        errors = errors + [lines[-1]]
    picked = errors or lines[-PIP_LINES:] or [f"{what} failed"]
    return f"{what}: " + " | ".join(picked)
