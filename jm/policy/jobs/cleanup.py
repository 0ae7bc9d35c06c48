"""Retention of files on disk: what the janitor (jm/cluster/jobs/janitor.py) may delete, and
how a log file over its cap is cut. Pure: no I/O, no clock; the janitor lists the folders,
reads the replicated state, passes `now` and deletes what `plan` names.

What is deleted, and why it is safe:

* a job's run folder (`<data>/jobs/<job>/`) and log folder (`<log>/jobs/<job>/`) once the
  job store no longer holds the job (it ended and was purged after
  `jobstore.expiration-time`): a job the state holds keeps all of its files, whatever its
  state, so its logs stay readable while it is listed. The janitor only plans on a replica
  that has applied its own registration (a restarted peer has replayed the log first).
* a blob (`<data>/blobs/<sha256>/`) no job in the store refers to (`pyfiles`, `script`),
  once unmodified for `jobmanager.blob.grace-period`: an upload in flight, or one not yet
  named by a submitted job, is younger than that (BlobStore.put touches a blob it is
  given again). The leader's janitor also forgets such an artifact in the replicated
  state (`stale_artifacts`, raft/artifacts.py): GET /artifacts lists what can be used.
* on the Raft leader only (shared storage): `<high-availability.storageDir>/<job>/` of a
  job the store no longer holds (its checkpoints); the savepoints in `state.savepoints.dir`
  beyond the newest `state.savepoints.num-retained` of each job, except pinned ones: the
  savepoint a job in the store resumes from (`savepoint-path`), the last one each job in
  the store completed, and any with a `_pinned` file (`touch <savepoint>/_pinned`).
  Before it deletes any of these, the leader's janitor passes a Raft barrier and is still
  the leader (a deposed leader keeps `is_leader()` until its fallback timeout, with a
  state that misses the newest jobs), and reads the state again.
* a Livy session's log (`<log>/livy-session-<n>.log`) once the session is closed (the
  state no longer holds its number).
* nothing modified in the last FOLDER_GRACE seconds (a job folder, a savepoint): the
  state read may be older than the files.
"""
from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from raft import artifacts

JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")  # jm/policy/jobs/spec.py JOBID_RE
DIGEST = re.compile(r"^[0-9a-f]{64}$")
PIN_FILE = "_pinned"

RUN_DIR, LOG_DIR, BLOB, CHECKPOINTS, SAVEPOINT, SHARED_BLOB, TEMP, SHARED_TEMP = (
    "run-dir", "log-dir", "blob", "checkpoints", "savepoint", "shared-blob", "temp",
    "shared-temp")
SESSION_LOG = "session-log"
LIVY_LOG = re.compile(r"livy-session-(\d{1,18})\.log")  # <log>/, jm/cluster/sql/livyrunner.py
LEADER_KINDS = frozenset({CHECKPOINTS, SAVEPOINT, SHARED_BLOB, SHARED_TEMP})  # shared storage
# the temporaries a copy writes before it renames them into place (left behind when the
# peer died during the copy): an upload (jm/cluster/blobs.py), a savepoint being written
# or staged for a remote store, a checkpoint being restored (jm/cluster/jobs/savepoint.py)
TEMP_NAME = re.compile(r"\.upload-[A-Za-z0-9_]+\.tmp|\..+\.inprogress"
                       r"|\.savepoint-[0-9a-f]{12}\.staging|checkpoints\.restoring")
# a folder or savepoint modified this recently is never deleted, whatever the state says:
# the state read may be older than the files (a job placed since, a leader deposed since)
FOLDER_GRACE = 10.0  # s


@dataclass(frozen=True)
class Entry:
    """One folder found in a listed directory: its base name and its newest modification
    time (of the folder and what it holds), on this host's wall clock."""
    name: str
    mtime: float


@dataclass(frozen=True)
class SavepointEntry:
    """A complete savepoint found in state.savepoints.dir (it has a `_metadata`)."""
    path: str      # normalised absolute path
    job_id: str    # from its _metadata
    time: float    # when it was taken (its _metadata), else its mtime
    mtime: float
    pinned: bool   # it holds a _pinned file


@dataclass(frozen=True)
class Listing:
    run_dirs: tuple = ()     # Entry: <data>/jobs/*
    log_dirs: tuple = ()     # Entry: <log>/jobs/*
    blobs: tuple = ()        # Entry: <data>/blobs/*
    ha_dirs: tuple = ()      # Entry: <storageDir>/* holding a job's checkpoints (leader)
    savepoints: tuple = ()   # SavepointEntry: state.savepoints.dir/* (leader)
    shared_blobs: tuple = () # Entry: <storageDir>/blobs/* (uploads' durable copies; leader)
    temps: tuple = ()        # Entry, by path: temporaries in this peer's blob folders
    shared_temps: tuple = () # Entry, by path: ... in the shared storage (leader)
    session_logs: tuple = () # Entry: <log>/livy-session-<n>.log


@dataclass(frozen=True)
class Refs:
    """What the replicated state still needs."""
    jobs: frozenset          # job ids the job store holds
    artifacts: frozenset     # sha256 hex digests the jobs' specs name
    savepoints: frozenset    # normalised savepoint paths jobs resume from or last wrote
    livy_sessions: frozenset = frozenset()  # numbers of the Livy sessions still open


@dataclass(frozen=True)
class Policy:
    blob_grace: float        # s: jobmanager.blob.grace-period
    savepoints_retained: int  # per job; 0: all (state.savepoints.num-retained)


@dataclass(frozen=True)
class Deletion:
    kind: str   # RUN_DIR, LOG_DIR, BLOB, CHECKPOINTS, SAVEPOINT
    name: str   # base name in the kind's folder (a savepoint: its path)
    why: str


def norm(path: str) -> str:
    return posixpath.normpath(path) if path else path


def refs_of(jobs_held: Iterable[Any], livy_sessions: Iterable[int] = ()) -> Refs:
    """Pure: what these jobs (the JobRecords of a ClusterState) need kept on disk. The
    caller takes the list under the state lock and walks it outside: at 50,000 jobs the
    walk takes longer than a lease renewal may wait (a job's spec is never changed after
    its submission, so reading it unlocked is safe)."""
    jobs, arts, sps = set(), set(), set()
    for job in jobs_held:
        jobs.add(job.id)
        arts.update(a.split(":", 1)[-1] for a in artifacts.named_by(job.spec))
        for loc in (job.spec.savepoint_path, job.savepoint_location):
            if isinstance(loc, str) and loc:
                sps.add(norm(loc))
    return Refs(frozenset(jobs), frozenset(arts), frozenset(sps), frozenset(livy_sessions))


def plan(listing: Listing, refs: Refs, policy: Policy, now: float) -> list[Deletion]:
    """Pure: what to delete now. Never a file of a job the store holds, a blob a job
    names or younger than the grace period, or a pinned or newest savepoint."""
    out: list[Deletion] = []
    for kind, entries, why in ((RUN_DIR, listing.run_dirs, "run folder"),
                               (LOG_DIR, listing.log_dirs, "log folder"),
                               (CHECKPOINTS, listing.ha_dirs, "checkpoints")):
        for e in entries:
            if (JOB_ID.fullmatch(e.name) and e.name not in refs.jobs
                    and now - e.mtime > FOLDER_GRACE):
                out.append(Deletion(kind, e.name, f"{why} of job {e.name}, which the job "
                                                  "store no longer holds"))
    for kind, entries in ((BLOB, listing.blobs), (SHARED_BLOB, listing.shared_blobs)):
        for e in entries:
            if (DIGEST.fullmatch(e.name) and e.name not in refs.artifacts
                    and now - e.mtime > policy.blob_grace):
                out.append(Deletion(kind, e.name, "no job refers to it and it is older than "
                                                  "jobmanager.blob.grace-period"))
    recent = {sp.path for sp in listing.savepoints if now - sp.mtime <= FOLDER_GRACE}
    for kind, entries in ((TEMP, listing.temps), (SHARED_TEMP, listing.shared_temps)):
        for e in entries:
            if (TEMP_NAME.fullmatch(posixpath.basename(e.name))
                    and now - e.mtime > policy.blob_grace):
                out.append(Deletion(kind, e.name, "a copy left unfinished (its peer stopped "
                                                  "during it), older than "
                                                  "jobmanager.blob.grace-period"))
    for e in listing.session_logs:
        m = LIVY_LOG.fullmatch(e.name)
        if m and int(m.group(1)) not in refs.livy_sessions and now - e.mtime > FOLDER_GRACE:
            out.append(Deletion(SESSION_LOG, e.name, f"log of Livy session {m.group(1)}, "
                                                     "which is closed"))
    out += [Deletion(SAVEPOINT, p, why) for p, why in
            savepoints_beyond(listing.savepoints, refs, policy.savepoints_retained)
            if p not in recent]
    return out


def stale_artifacts(known: Iterable[Any], refs: Refs, policy: Policy, now: float) -> list[str]:
    """Pure: the ids of the known artifacts (ArtifactRecords) to forget: no job names them
    and they were last uploaded more than the grace period ago (as their blobs go)."""
    return [a.id for a in known if a.id.split(":", 1)[-1] not in refs.artifacts
            and isinstance(a.created, (int, float)) and now - a.created > policy.blob_grace]


def savepoints_beyond(savepoints: Iterable[SavepointEntry], refs: Refs, retained: int
                      ) -> list[tuple[str, str]]:
    """Pure: (path, why) of each job's savepoints beyond its newest `retained` (0: none),
    pinned ones excepted (they count among the newest)."""
    if retained <= 0:
        return []
    by_job: dict[str, list[SavepointEntry]] = {}
    for sp in savepoints:
        by_job.setdefault(sp.job_id, []).append(sp)
    out = []
    for job_id, sps in sorted(by_job.items()):
        sps.sort(key=lambda s: (s.time, s.mtime, s.path), reverse=True)
        for sp in sps[retained:]:
            if sp.pinned or norm(sp.path) in refs.savepoints:
                continue
            out.append((sp.path, f"savepoint of job {job_id} beyond the newest {retained} "
                                 "(state.savepoints.num-retained)"))
    return out


# ---- capping a log file that a process keeps appending to ------------------------------

MARKER = re.compile(rb"\n\[jobmanager: (\d+) bytes of this log dropped here[^\]\n]*\]\n")


def marker(dropped: int, cap: int) -> bytes:
    return (f"\n[jobmanager: {dropped} bytes of this log dropped here "
            f"(jobmanager.job-log.max-size: {cap} bytes)]\n").encode()


@dataclass(frozen=True)
class Cut:
    """Keep bytes [0, head) and [tail, size); put a marker in between. `prior` bytes were
    dropped by earlier cuts (their marker lies in the dropped part)."""
    head: int
    tail: int
    prior: int

    def dropped(self, old_marker_len: int) -> int:
        return self.tail - self.head - old_marker_len + self.prior


def head_window(cap: int) -> int:
    """How many leading bytes `plan_cut` wants to see."""
    return cap // 4 + 256


def plan_cut(size: int, cap: int, start: bytes) -> Optional[tuple[Cut, int]]:
    """Pure: how to bring a log of `size` bytes over `cap` back to about 3/4 of it, keeping
    its first quarter (how the job started) and its last half (what it does now), both at
    line boundaries where there are any. `start` is the file's first head_window(cap)
    bytes. Returns (cut, length of an earlier cut's marker it drops) or None."""
    if cap <= 0 or size <= cap:
        return None
    m = MARKER.search(start)
    if m is not None and m.start() <= cap // 4:   # cut before: keep the same head
        head, prior, old = m.start(), int(m.group(1)), len(m.group(0))
    else:
        quarter = start[:cap // 4]
        nl = quarter.rfind(b"\n")
        head, prior, old = (nl + 1 if nl >= 0 else len(quarter)), 0, 0
    tail = max(size - cap // 2, head + old)
    if tail - head - old < len(marker(size, cap)) + 1:
        return None  # nothing worth dropping (a cap this small cannot be kept)
    return Cut(head, tail, prior), old


def align_tail(cut: Cut, tail_bytes: bytes) -> Cut:
    """Pure: start the kept tail at a line start if one is in its first half."""
    nl = tail_bytes.find(b"\n", 0, len(tail_bytes) // 2)
    return cut if nl < 0 else Cut(cut.head, cut.tail + nl + 1, cut.prior)


def runs_beyond(runs: list[tuple[int, int]], cap: int) -> list[int]:
    """Pure: an attempt's run logs [(restart index, size)] hold at most about `cap` bytes
    besides its first and its newest run (how it started, what it does now): the oldest
    runs in between go first. Returns the restart indexes whose files to delete."""
    if cap <= 0 or len(runs) < 3:
        return []
    runs = sorted(runs)
    total = sum(size for _, size in runs[1:-1])
    out = []
    for run, size in runs[1:-1]:
        if total <= cap:
            break
        out.append(run)
        total -= size
    return out


# ---- free space ---------------------------------------------------------------------------

def _size(n: float) -> str:
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def disk_low(where: str, free: int, total: int, min_free: tuple) -> Optional[str]:
    """Pure: a warning if `free` bytes of `total` is below jobmanager.disk.min-free
    (`min_free` = (bytes, percent), one of them 0), else None."""
    need_bytes, percent = min_free
    need = max(need_bytes, int(total * percent / 100.0)) if total > 0 else need_bytes
    if need <= 0 or free >= need:
        return None
    share = f" ({100.0 * free / total:.1f}% of {_size(total)})" if total > 0 else ""
    limit = f"{percent:g}%" if percent else _size(need_bytes)
    return (f"only {_size(free)} free on {where}{share}, below jobmanager.disk.min-free "
            f"({limit})")
