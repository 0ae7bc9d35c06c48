"""The janitor: every peer deletes, on a schedule, the files nothing needs any more, caps
the logs its job processes and child processes write, and watches its free disk space.
The peer's own log rotates in jm/cluster/peerlog.py.

What may be deleted is decided by jm/policy/jobs/cleanup.py (pure) from the replicated state
and a listing of the folders; this module lists, decides and deletes:

* every `jobmanager.cleanup.interval`, once this incarnation's registration is applied
  (its replica has replayed the log): this peer's run and log folders of jobs the job
  store no longer holds, and its blobs no job refers to (after
  `jobmanager.blob.grace-period`); on the Raft leader also the shared storage: the
  checkpoint folders (`<high-availability.storageDir>/<job>/`) of those jobs and the
  savepoints beyond `state.savepoints.num-retained` per job; and the logs of the Livy
  sessions closed since (`<log dir>/livy-session-<n>.log`). The state is read again just
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
import logging
import os
import shutil
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from jm.cluster.blobs import BlobStore, newest_mtime
from jm.cluster.jobs.savepoint import list_savepoints, remove as remove_savepoint
from jm.policy.jobs import cleanup
from jm.policy.jobs.fsuri import is_remote
from jm.policy.jobs.cleanup import (BLOB, CHECKPOINTS, LOG_DIR, RUN_DIR, SAVEPOINT, SESSION_LOG,
                                    SHARED_BLOB, SHARED_TEMP, TEMP, Deletion, Entry, Listing,
                                    Policy)
from jm.policy.jobs.retention import purge_batches
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
        if self.raft is None or not self._ready() or not self.raft.membership.caught_up():
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
            if any(os.path.exists(os.path.join(path, name)) for name in
                   ("checkpoints", "restored-from", "checkpoints.restoring")):
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
            if leader and self.shared_blobs is not None else (),
            temps=tuple(Entry(p, m) for p, m in self.blobs.temps()),
            shared_temps=self._shared_temps() if leader else (),
            session_logs=_files(self.cfg.log_dir, cleanup.LIVY_LOG))

    def _shared_temps(self) -> tuple:
        """Unfinished copies in the shared storage: savepoints being written
        (`.<name>.inprogress` in state.savepoints.dir), staged for a remote store or
        restored (in the HA storage's job folders), uploads' copies being written."""
        folders = [os.path.join(self.cfg.ha_dir, e.name) for e in self._ha_entries()]
        if not is_remote(self.cfg.savepoints_dir):
            folders.append(self.cfg.savepoints_dir)
        out = []
        for folder in folders:
            try:
                names = [n for n in os.listdir(folder) if cleanup.TEMP_NAME.fullmatch(n)]
            except OSError:
                continue
            for name in names:  # (only these are walked: a checkpoint can be large)
                mtime = newest_mtime(os.path.join(folder, name))
                if mtime is not None:
                    out.append(Entry(os.path.join(folder, name), mtime))
        if self.shared_blobs is not None:
            out += [Entry(p, m) for p, m in self.shared_blobs.temps()]
        return tuple(out)

    def _refs(self) -> cleanup.Refs:
        """What the state's jobs need kept (blocking: the walk runs unlocked)."""
        with self.raft.read() as st:
            jobs, livy = list(st.jobs.values()), list(st.livy_ids)
        return cleanup.refs_of(jobs, livy)

    def _path(self, d: Deletion) -> str:
        base = {RUN_DIR: os.path.join(self.cfg.data_dir, "jobs"),
                LOG_DIR: os.path.join(self.cfg.log_dir, "jobs"),
                SESSION_LOG: self.cfg.log_dir,
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
            if d.kind == SESSION_LOG and _livy_number(d.name) in refs.livy_sessions:
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
                elif d.kind == SESSION_LOG:
                    os.unlink(self._path(d))
                elif d.kind in (TEMP, SHARED_TEMP):
                    _remove_path(d.name)
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
        engines = os.path.join(self.cfg.log_dir, "engines")  # each engine's own logs
        try:
            engine_dirs = [e.path for e in os.scandir(engines) if e.is_dir()]
        except OSError:
            engine_dirs = []
        for folder in [self.cfg.log_dir] + engine_dirs + [
                os.path.join(self.cfg.log_dir, "jobs", j)
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


def _files(folder: str, pattern) -> tuple:
    """Entry(name, mtime) of the files in `folder` whose name matches `pattern`."""
    out = []
    try:
        with os.scandir(folder) as it:
            for e in it:
                if pattern.fullmatch(e.name) and e.is_file(follow_symlinks=False):
                    try:
                        out.append(Entry(e.name, e.stat(follow_symlinks=False).st_mtime))
                    except OSError:
                        continue  # gone meanwhile
    except OSError:
        return ()
    return tuple(out)


def _livy_number(name: str) -> int:
    m = cleanup.LIVY_LOG.fullmatch(name)
    return int(m.group(1)) if m else -1


def _remove_path(path: str) -> None:
    """A file, or a folder with what it holds (not following a symbolic link)."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    else:
        os.unlink(path)
