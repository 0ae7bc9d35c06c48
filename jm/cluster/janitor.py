"""The janitor: every peer deletes, on a schedule, the files nothing needs any more, caps
the logs its job processes and child processes write, and watches its free disk space.
The peer's own log rotates (`peer_log_handler`).

What may be deleted is decided by jm/policy/cleanup.py (pure) from the replicated state
and a listing of the folders; this module lists, decides and deletes:

* every `jobmanager.cleanup.interval`, once this incarnation's registration is applied
  (its replica has replayed the log): this peer's run and log folders of jobs the job
  store no longer holds, and its blobs no job refers to (after
  `jobmanager.blob.grace-period`); on the Raft leader also the shared storage: the
  checkpoint folders (`<high-availability.storageDir>/<job>/`) of those jobs and the
  savepoints beyond `state.savepoints.num-retained` per job. The state is read again just
  before deleting, so a job submitted meanwhile keeps its files.
* every `jobmanager.job-log.check-interval`: each log file of a job assigned here, and
  the logs of the peer's child processes (zygote, Spark Connect server, SQL worker), is
  cut back under `jobmanager.job-log.max-size` (jm/runtime/joblogs.py `cap_file`).
* free space on the data and log folders below `jobmanager.disk.min-free` is a warning:
  `/healthz` shows `disk-low` (the answer stays 200: a peer with little room still works;
  a disk that refuses writes is `disk-problem`, 503) and the log says so once.
"""
from __future__ import annotations

import asyncio
import fcntl
import logging
import logging.handlers
import os
import shutil
import stat
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from jm.cluster.blobs import BlobStore, newest_mtime
from jm.cluster.savepoint import list_savepoints, remove as remove_savepoint
from jm.policy import cleanup
from jm.policy.fsuri import is_remote
from jm.policy.cleanup import (BLOB, CHECKPOINTS, LOG_DIR, RUN_DIR, SAVEPOINT, SHARED_BLOB,
                               Deletion, Entry, Listing, Policy)
from jm.policy.retention import purge_batches
from jm.runtime import joblogs
from raft.commands import ForgetArtifacts
from raft.node import RaftUnavailable

log = logging.getLogger("jm.cluster.janitor")
FORGET_TIMEOUT = 5.0  # s: one ForgetArtifacts committed


@dataclass(frozen=True)
class JanitorConfig:
    data_dir: str          # this peer's <jobmanager.data-dir>/<node>
    log_dir: str           # this peer's <env.log.dir>/<node>
    ha_dir: str            # high-availability.storageDir (shared)
    savepoints_dir: str    # state.savepoints.dir (shared)
    interval: float        # jobmanager.cleanup.interval (0: no cleanup)
    blob_grace: float      # jobmanager.blob.grace-period
    savepoints_retained: int   # state.savepoints.num-retained (0: all)
    log_cap: int           # jobmanager.job-log.max-size (0: no cap)
    cap_interval: float    # jobmanager.job-log.check-interval (0: no cap)
    min_free: tuple        # jobmanager.disk.min-free: (bytes, percent)

    @staticmethod
    def from_conf(conf: Any, data_dir: str, log_dir: str) -> "JanitorConfig":
        return JanitorConfig(
            data_dir, log_dir, conf.path("high-availability.storageDir"),
            conf.savepoints_dir(), conf["jobmanager.cleanup.interval"],
            conf["jobmanager.blob.grace-period"], conf["state.savepoints.num-retained"],
            conf["jobmanager.job-log.max-size"], conf["jobmanager.job-log.check-interval"],
            conf["jobmanager.disk.min-free"])


class Janitor:
    def __init__(self, cfg: JanitorConfig, blobs: BlobStore, node: str,
                 shared_blobs: Optional[BlobStore] = None) -> None:
        self.cfg = cfg
        self.blobs = blobs
        self.shared_blobs = shared_blobs  # <storageDir>/blobs: cleaned by the leader
        self.node = node
        self.raft: Any = None
        self._ready: Callable[[], bool] = lambda: False
        self._tasks: list[asyncio.Task] = []
        self._low: Optional[str] = None
        self.sweeps = 0          # completed sweeps (tests wait for one)
        self.deleted: list[Deletion] = []   # the last sweep's deletions

    # ---- lifecycle ----------------------------------------------------------------------
    def start(self, raft: Any, ready: Callable[[], bool]) -> None:
        """`ready`: this replica has applied this incarnation's registration."""
        self.raft, self._ready = raft, ready
        if self.cfg.interval > 0:
            self._tasks.append(asyncio.create_task(self._every(self.cfg.interval, self.sweep)))
        self._tasks.append(asyncio.create_task(self._every(
            self.cfg.cap_interval if self.cfg.cap_interval > 0 else 5.0, self._watch)))

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _every(self, interval: float, step: Callable) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                await step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("janitor: %s failed", getattr(step, "__name__", step))

    # ---- deleting what nothing needs ----------------------------------------------------
    def _policy(self) -> Policy:
        return Policy(self.cfg.blob_grace, self.cfg.savepoints_retained)

    async def sweep(self) -> list[Deletion]:
        """One round: list, decide (pure), delete. Nothing before the replica is ready."""
        if self.raft is None or not self._ready() or not self.raft.caught_up():
            return []
        leader = self.raft.is_leader()
        listing = await asyncio.to_thread(self._list, leader)
        refs = await asyncio.to_thread(self._refs)
        todo = cleanup.plan(listing, refs, self._policy(), time.time())
        if any(d.kind in cleanup.LEADER_KINDS for d in todo) and not await self._still_leads():
            todo = [d for d in todo if d.kind not in cleanup.LEADER_KINDS]
        done = await asyncio.to_thread(self._delete, todo) if todo else []
        if leader:
            await self._forget_artifacts(refs)
        self.deleted = done
        self.sweeps += 1
        return done

    async def _still_leads(self) -> bool:
        """Before deleting in the shared storage: a Raft barrier (an entry of this term
        committed by a majority, and applied here) and still the leader. A deposed leader
        (is_leader() until its fallback timeout) fails it; one that passes reads, in
        `_delete`, a state with everything committed before it."""
        try:
            await self.raft.barrier(FORGET_TIMEOUT)
        except RaftUnavailable:
            return False
        return self.raft.is_leader()

    async def _forget_artifacts(self, refs: cleanup.Refs) -> None:
        """The leader: forget the artifacts whose files go (GET /artifacts lists only what
        a job can use); `refs`: the sweep's, as the state machine checks again that no job
        names them."""
        now = time.time()
        with self.raft.read() as st:
            stale = cleanup.stale_artifacts(list(st.artifacts.values()), refs,
                                            self._policy(), now)
        for chunk in purge_batches(stale):
            try:
                res = await self.raft.submit(ForgetArtifacts(
                    chunk, now - self.cfg.blob_grace, now), FORGET_TIMEOUT)
            except RaftUnavailable:
                return  # the next sweep tries again
            if res.ok and res.value:
                log.info("janitor: forgot %d artifact(s) no job names, older than "
                         "jobmanager.blob.grace-period: %s", len(res.value),
                         ", ".join(res.value[:5]) + (" ..." if len(res.value) > 5 else ""))

    def _entries(self, folder: str) -> tuple:
        out = []
        try:
            names = os.listdir(folder)
        except OSError:
            return ()
        for name in names:
            mtime = newest_mtime(os.path.join(folder, name))
            if mtime is not None:
                out.append(Entry(name, mtime))
        return tuple(out)

    def _ha_entries(self) -> tuple:
        """Job folders in the HA storage: those holding checkpoints or a restore marker
        (anything else there, the savepoints folder included, is not a job's)."""
        sp_dir = ("" if is_remote(self.cfg.savepoints_dir)
                  else os.path.realpath(self.cfg.savepoints_dir))
        out = []
        for e in self._entries(self.cfg.ha_dir):
            path = os.path.join(self.cfg.ha_dir, e.name)
            if sp_dir and (os.path.realpath(path) == sp_dir
                           or sp_dir.startswith(os.path.realpath(path) + os.sep)):
                continue
            if (os.path.isdir(os.path.join(path, "checkpoints"))
                    or os.path.exists(os.path.join(path, "restored-from"))):
                out.append(e)
        return tuple(out)

    def _list(self, leader: bool) -> Listing:
        blobs = tuple(Entry(d, m) for d, m in self.blobs.entries())
        return Listing(
            run_dirs=self._entries(os.path.join(self.cfg.data_dir, "jobs")),
            log_dirs=self._entries(os.path.join(self.cfg.log_dir, "jobs")),
            blobs=blobs,
            ha_dirs=self._ha_entries() if leader else (),
            # a remote state.savepoints.dir: the store's lifecycle rules, not ours
            savepoints=tuple(list_savepoints(self.cfg.savepoints_dir))
            if leader and not is_remote(self.cfg.savepoints_dir) else (),
            shared_blobs=tuple(Entry(d, m) for d, m in self.shared_blobs.entries())
            if leader and self.shared_blobs is not None else ())

    def _refs(self) -> cleanup.Refs:
        """What the state's jobs need kept (blocking: the walk runs unlocked)."""
        with self.raft.read() as st:
            jobs = list(st.jobs.values())
        return cleanup.refs_of(jobs)

    def _path(self, d: Deletion) -> str:
        base = {RUN_DIR: os.path.join(self.cfg.data_dir, "jobs"),
                LOG_DIR: os.path.join(self.cfg.log_dir, "jobs"),
                CHECKPOINTS: self.cfg.ha_dir}.get(d.kind)
        return os.path.join(base, d.name) if base else d.name

    def _delete(self, todo: list[Deletion]) -> list[Deletion]:
        """Delete what the plan names that the state, read again now, still does not need
        (a job submitted since the plan keeps its files)."""
        refs = self._refs()
        pinned = ({os.path.realpath(p) for p in refs.savepoints}
                  if any(d.kind == SAVEPOINT for d in todo) else set())
        done = []
        for d in todo:
            if d.kind in (RUN_DIR, LOG_DIR, CHECKPOINTS) and d.name in refs.jobs:
                continue
            if d.kind in (BLOB, SHARED_BLOB) and d.name in refs.artifacts:
                continue
            if d.kind == SAVEPOINT and (cleanup.norm(d.name) in refs.savepoints
                                        or os.path.realpath(d.name) in pinned):
                continue  # named by a job (maybe through a symbolic link)
            try:
                if d.kind == BLOB:
                    self.blobs.remove(d.name)
                elif d.kind == SHARED_BLOB and self.shared_blobs is not None:
                    self.shared_blobs.remove(d.name)
                elif d.kind == SAVEPOINT:
                    remove_savepoint(d.name)
                else:
                    shutil.rmtree(self._path(d), ignore_errors=True)
            except OSError as exc:
                log.warning("janitor: could not delete %s: %s", self._path(d), exc)
                continue
            log.info("janitor: deleted %s (%s)", self._path(d), d.why)
            done.append(d)
        return done

    # ---- logs and free space --------------------------------------------------------------
    async def _watch(self) -> None:
        if self.cfg.log_cap > 0 and self.cfg.cap_interval > 0:
            await asyncio.to_thread(self.cap_logs, self._jobs_here())
        self._check_disk()

    def _jobs_here(self) -> list[str]:
        if self.raft is None:
            return []
        with self.raft.read() as st:
            return st.jobs_of(self.node)

    def cap_logs(self, job_ids: list[str]) -> int:
        """Cut every over-cap log of the jobs running here and of the peer's children."""
        files = []
        for folder in [self.cfg.log_dir] + [os.path.join(self.cfg.log_dir, "jobs", j)
                                            for j in job_ids if cleanup.JOB_ID.fullmatch(j)]:
            try:
                with os.scandir(folder) as it:
                    files += [e.path for e in it if e.is_file(follow_symlinks=False)
                              and ".log" in e.name]
            except OSError:
                continue
        dropped = 0
        for j in job_ids:
            if cleanup.JOB_ID.fullmatch(j):
                for path in joblogs.trim_runs(self.cfg.log_dir, j, self.cfg.log_cap):
                    log.info("janitor: deleted %s (older runs of the attempt over "
                             "jobmanager.job-log.max-size)", path)
                    if path in files:
                        files.remove(path)
        for path in files:
            n = joblogs.cap_file(path, self.cfg.log_cap)
            if n:
                log.info("janitor: %s over jobmanager.job-log.max-size: cut (%d bytes "
                         "dropped so far)", path, n)
                dropped += n
        return dropped

    def disk_low(self) -> Optional[str]:
        """A warning if the data or log folder's file system has less room than
        jobmanager.disk.min-free, else None."""
        seen, problems = set(), []
        for where in (self.cfg.data_dir, self.cfg.log_dir):
            try:
                st = os.statvfs(where)
                dev = os.stat(where).st_dev
            except OSError:
                continue
            if dev in seen:
                continue
            seen.add(dev)
            msg = cleanup.disk_low(where, st.f_bavail * st.f_frsize,
                                   st.f_blocks * st.f_frsize, self.cfg.min_free)
            if msg:
                problems.append(msg)
        return "; ".join(problems) or None

    def health(self) -> dict:
        """Fields for /healthz (a warning: it does not make the peer unhealthy)."""
        return {"disk-low": self.disk_low()}

    @property
    def low(self) -> str:
        """The last free-space check's warning ("" if none): sent with the heartbeats."""
        return self._low or ""

    def _check_disk(self) -> None:
        low = self.disk_low()
        if low and not self._low:
            log.warning("low disk space: %s", low)
        elif self._low and not low:
            log.info("disk space is above jobmanager.disk.min-free again")
        self._low = low


# ---- the peer's own log ---------------------------------------------------------------------

class _RotatingStdout(logging.handlers.RotatingFileHandler):
    """Rotates the file the peer's stdout and stderr were redirected to (bin/jobmanager.sh
    `>> log`): after each rollover fds 1 and 2 point at the new file, so what is printed
    there (tracebacks, warnings) follows, and no rotated file is held open."""

    fds: list = [1]  # the descriptors that were redirected to the log file

    def doRollover(self) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        super().doRollover()
        if self.stream is not None:
            fd = self.stream.fileno()
            for target in self.fds:
                try:
                    os.dup2(fd, target)
                except OSError:
                    pass


def peer_log_handler(max_size: int, max_files: int) -> Optional[logging.Handler]:
    """A rotating handler on the file stdout goes to, if stdout is a regular file and
    env.log.max-size is set; None otherwise (log to stdout as it is)."""
    if max_size <= 0:
        return None
    try:
        st = os.fstat(1)
        if not stat.S_ISREG(st.st_mode):
            return None
        path = os.readlink("/proc/self/fd/1")
        same = os.stat(path)
    except OSError:
        return None
    if (same.st_dev, same.st_ino) != (st.st_dev, st.st_ino):
        return None  # the file was moved or deleted
    handler = _RotatingStdout(path, maxBytes=max_size, backupCount=max_files, encoding="utf-8")
    handler.fds = [1, 2] if _same_file(2, st) else [1]
    # the handler appends through its own descriptor: fds 1 and 2 must append too, or a
    # file opened for writing (systemd `StandardOutput=file:`) has what is written there
    # (a `kill -USR2` stack dump, a traceback) land over the handler's lines
    for fd in handler.fds:
        try:
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
            if not flags & os.O_APPEND:
                fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_APPEND)
        except OSError:
            pass
    return handler


def _same_file(fd: int, st: os.stat_result) -> bool:
    try:
        other = os.fstat(fd)
    except OSError:
        return False
    return (other.st_dev, other.st_ino) == (st.st_dev, st.st_ino)
