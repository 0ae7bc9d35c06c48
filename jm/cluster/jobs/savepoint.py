"""Savepoints: self-contained copies of a job's checkpoint directory at a micro-batch
boundary, and the restore of one into a job's checkpoint directory.

A Spark Structured Streaming checkpoint (a directory with `offsets/` and `commits/`) is
consistent at its last committed batch N: `commits/N` is written after the sink and the
state store committed batch N. A copy taken while the query runs keeps exactly what
batch N needs: offsets, commits and source-log entries up to N and state-store versions
up to N + 1 (Spark stores batch N's state as version N + 1); anything newer is a batch in
flight and is left out, so a restore replays it. Spark writes every one of these files
with an atomic rename, so each file copied is whole. Other files under the checkpoint
directory are copied as they are; a job that keeps its own state there should stop
(stop-with-savepoint) for a consistent copy.

Layout of a savepoint: `<location>/_metadata` (JSON) and `<location>/checkpoint/...`.
It is written under a temporary name and renamed into place, so a savepoint that exists
is complete. A remote location (s3://, gs://, hdfs://: jm/cluster/jobs/remotefs.py) is staged
next to the checkpoint and uploaded with `_metadata` last: there a savepoint whose
`_metadata` exists is complete.

Retention (the Raft leader's janitor, jm/policy/jobs/cleanup.py): in `state.savepoints.dir` each
job keeps its newest `state.savepoints.num-retained` savepoints; a savepoint holding a
`_pinned` file (`touch <location>/_pinned`), one a job in the job store resumes from and
each job's last one are never deleted. Other target directories, and a remote
`state.savepoints.dir`, are left alone (an object store's lifecycle rules expire old
savepoints there).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from typing import Optional

from jm.cluster.jobs import remotefs
from jm.cluster.jobs.jobfiles import Refused, copy_regular, copy_tree, read_bounded
from jm.policy.jobs.cleanup import PIN_FILE, SavepointEntry, norm
from jm.policy.jobs.fsuri import is_remote, join

METADATA = "_metadata"
MAX_METADATA = 1 << 20  # bytes of a savepoint's _metadata read (it lists its queries)
RESTORED_MARKER = "restored-from"
_BATCH_FILE = re.compile(r"^\.?(\d+)(?:\.compact)?(?:\.crc)?$")
_STATE_FILE = re.compile(r"^\.?(\d+)(?:[._].*)?$")


class SavepointError(Exception):
    pass


def new_location(directory: str, job_id: str) -> str:
    """Flink's naming: savepoint-<first 6 of the job id>-<12 hex>."""
    return join(directory, f"savepoint-{job_id[:6]}-{uuid.uuid4().hex[:12]}")


def last_committed(query_dir: str) -> int:
    """The last committed batch of a streaming query checkpoint (-1: none yet)."""
    best = -1
    try:
        names = os.listdir(os.path.join(query_dir, "commits"))
    except FileNotFoundError:
        return -1
    for name in names:
        if name.startswith("."):
            continue
        m = _BATCH_FILE.match(name)
        if m:
            best = max(best, int(m.group(1)))
    return best


_TEMP_FILE = re.compile(r"^\.\.?.+\.tmp(?:\.crc)?$")  # Hadoop's atomic write in progress


def sweep_temporaries(checkpoint_dir: str) -> list[str]:
    """Delete the files a killed attempt left half-written in its queries' offsets and
    commits logs (`.<batch>.<uuid>.tmp` and its `.crc`: Spark writes a log entry there,
    then renames it): Spark refuses to start batch 0 of a query whose offsets log holds
    anything (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY), so a job killed while writing
    its first batch could never run again. Only between attempts (nothing writes then).
    -> the paths deleted."""
    gone = []
    for root, dirs, files in os.walk(checkpoint_dir):
        if _is_query_dir(root):  # only its logs: never walk its state store's files
            dirs[:] = [d for d in dirs if d in ("offsets", "commits")]
            continue
        if os.path.basename(root) not in ("offsets", "commits") or \
                not _is_query_dir(os.path.dirname(root)):
            continue
        for name in files:
            if _TEMP_FILE.match(name):
                path = os.path.join(root, name)
                try:
                    os.unlink(path)
                    gone.append(path)
                except FileNotFoundError:
                    pass
    return gone


def checkpoint_query_ids(checkpoint_dir: str, depth: int = 3) -> frozenset:
    """The ids of the streaming queries checkpointed in a job's checkpoint dir, at most
    `depth` folders down (Spark keeps a query's id in its checkpoint's `metadata` file, the
    same across the query's restarts)."""
    ids = set()
    top = checkpoint_dir.rstrip(os.sep).count(os.sep)
    for root, dirs, _ in os.walk(checkpoint_dir):
        if _is_query_dir(root):
            dirs[:] = []  # a query checkpoint holds no other query
            try:
                with open(os.path.join(root, "metadata"), "rb") as f:
                    meta = json.loads(f.read(4096))
                ids.add(str(meta["id"]))
            except (OSError, ValueError, KeyError, TypeError):
                pass
        elif root.count(os.sep) - top >= depth:
            dirs[:] = []
    return frozenset(ids)


def _is_query_dir(path: str) -> bool:
    return os.path.isdir(os.path.join(path, "offsets")) and \
        os.path.isdir(os.path.join(path, "commits"))


def _keep(rel_parts: tuple, name: str, committed: int) -> bool:
    """Whether a file at query-relative path rel_parts/name belongs to batch <= committed."""
    if name.endswith(".tmp") or ".tmp." in name or name.startswith("_temporary"):
        return False
    top = rel_parts[0] if rel_parts else ""
    if top in ("offsets", "commits") or (top == "sources" and len(rel_parts) >= 2):
        m = _BATCH_FILE.match(name)
        return m is None or int(m.group(1)) <= committed
    if top == "state":
        m = _STATE_FILE.match(name)
        return m is None or int(m.group(1)) <= committed + 1
    return True




def _copy_tree(src: str, dst: str, queries: dict) -> None:
    for root, dirs, files in os.walk(src):
        dirs.sort()
        rel = os.path.relpath(root, src)
        target = dst if rel == "." else os.path.join(dst, rel)
        os.makedirs(target, exist_ok=True)
        query, parts = _query_of(src, rel, queries)
        for name in sorted(files):
            if query is not None and not _keep(parts, name, queries[query]):
                continue
            copy_regular(os.path.join(root, name), os.path.join(target, name))


def _query_of(src: str, rel: str, queries: dict) -> tuple[Optional[str], tuple]:
    if rel == ".":
        parts: tuple = ()
    else:
        parts = tuple(rel.split(os.sep))
    for i in range(len(parts), -1, -1):
        key = os.sep.join(parts[:i]) or "."
        if key in queries:
            return key, parts[i:]
    return None, parts


def _stage(checkpoint_dir: str, tmp: str, meta: dict) -> dict:
    """Write a savepoint's content into the new directory `tmp`; return its metadata."""
    queries: dict[str, int] = {}
    if os.path.isdir(checkpoint_dir):
        for root, dirs, _ in os.walk(checkpoint_dir):
            if _is_query_dir(root):
                queries[os.path.relpath(root, checkpoint_dir)] = last_committed(root)
                dirs[:] = []  # a query checkpoint holds no other query
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp, mode=0o700)  # a tenant's state: the peer's user's only (restore copies)
    data = os.path.join(tmp, "checkpoint")
    if os.path.isdir(checkpoint_dir):
        _copy_tree(checkpoint_dir, data, queries)
    else:
        os.makedirs(data)
    return dict(meta, **{"version": 1, "queries": {q: {"last-committed-batch": n}
                                                   for q, n in sorted(queries.items())}})


def snapshot(checkpoint_dir: str, location: str, meta: dict,
             fs_options: Optional[dict] = None) -> dict:
    """Copy `checkpoint_dir` into a new savepoint at `location` (a path, or a remote URI:
    staged next to `checkpoint_dir`, then uploaded with `_metadata` last); return its
    metadata."""
    if is_remote(location):
        stage = os.path.join(os.path.dirname(checkpoint_dir.rstrip("/")) or ".",
                             f".savepoint-{uuid.uuid4().hex[:12]}.staging")
        try:
            out = _stage(checkpoint_dir, stage, meta)
            remotefs.put_savepoint(stage, location, fs_options or {},
                                   json.dumps(out, indent=1, sort_keys=True))
        except OSError as exc:
            raise SavepointError(f"could not stage savepoint {location}: {exc}") from exc
        except remotefs.RemoteError as exc:
            raise SavepointError(str(exc)) from exc
        finally:
            shutil.rmtree(stage, ignore_errors=True)
        return out
    if os.path.exists(location):
        raise SavepointError(f"savepoint location {location} already exists")
    parent = os.path.dirname(location.rstrip("/")) or "."
    try:
        os.makedirs(parent, exist_ok=True)
        tmp = os.path.join(parent, f".{os.path.basename(location)}.inprogress")
        try:
            out = _stage(checkpoint_dir, tmp, meta)
            with open(os.path.join(tmp, METADATA), "w") as f:
                json.dump(out, f, indent=1, sort_keys=True)
            os.rename(tmp, location)
        except BaseException:  # (a peer that dies here leaves it: the janitor's)
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    except OSError as exc:
        raise SavepointError(f"could not write savepoint {location}: {exc}") from exc
    return out


def read_metadata(location: str, fs_options: Optional[dict] = None) -> dict:
    remote = is_remote(location)
    try:
        if remote:
            text = remotefs.read_text(join(location, METADATA), fs_options or {},
                                      MAX_METADATA)
        else:
            text = read_bounded(os.path.join(location, METADATA), MAX_METADATA)
    except FileNotFoundError:
        text = None
    except Refused as exc:
        raise SavepointError(f"cannot read savepoint {location}: its {METADATA} {exc.why}")
    except remotefs.RemoteError as exc:
        raise SavepointError(str(exc))
    except OSError as exc:
        raise SavepointError(f"cannot read savepoint {location}: {exc}")
    if text is None:
        raise SavepointError(f"{location} is not a savepoint (no {METADATA} "
                             f"{'object' if remote else 'file'})")
    try:
        meta = json.loads(text)
    except ValueError as exc:
        raise SavepointError(f"cannot read savepoint {location}: {exc}")
    # a remote savepoint of an empty checkpoint has no objects under checkpoint/
    if not isinstance(meta, dict) or (
            not remote and not os.path.isdir(os.path.join(location, "checkpoint"))):
        raise SavepointError(f"{location} is not a complete savepoint")
    return meta


def restore(location: str, checkpoint_dir: str, marker_dir: str,
            fs_options: Optional[dict] = None) -> bool:
    """Make `checkpoint_dir` a copy of the savepoint, once per job: a marker in
    `marker_dir` remembers it, so later attempts resume from their own checkpoints.
    Returns True if it restored now."""
    marker = os.path.join(marker_dir, RESTORED_MARKER)
    if os.path.exists(marker):
        return False
    read_metadata(location, fs_options)
    tmp = checkpoint_dir.rstrip("/") + ".restoring"
    try:
        os.makedirs(marker_dir, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            if is_remote(location):
                try:
                    remotefs.get_checkpoint(location, tmp, fs_options or {})
                except remotefs.RemoteError as exc:
                    raise SavepointError(str(exc)) from exc
            else:
                copy_tree(os.path.join(location, "checkpoint"), tmp)
            shutil.rmtree(checkpoint_dir, ignore_errors=True)
            os.rename(tmp, checkpoint_dir)
        except BaseException:  # (a peer that dies here leaves it: the janitor's)
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        with open(marker + ".tmp", "w") as f:
            f.write(location + "\n")
        os.replace(marker + ".tmp", marker)
    except OSError as exc:
        raise SavepointError(f"could not restore savepoint {location}: {exc}") from exc
    return True


def list_savepoints(directory: str) -> list[SavepointEntry]:
    """The complete savepoints directly in `directory` whose _metadata names their job
    (in-progress copies, other folders and files are not listed)."""
    out = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return out
    for name in names:
        if name.startswith("."):
            continue
        path = os.path.join(directory, name)
        try:
            meta = json.loads(read_bounded(os.path.join(path, METADATA), MAX_METADATA))
            mtime = os.stat(path).st_mtime
        except (OSError, ValueError, Refused):
            continue
        job_id = meta.get("job-id") if isinstance(meta, dict) else None
        if not isinstance(job_id, str) or not job_id:
            continue
        when = meta.get("time")
        when = float(when) if isinstance(when, (int, float)) else mtime
        out.append(SavepointEntry(norm(os.path.abspath(path)), job_id, when, mtime,
                                  os.path.exists(os.path.join(path, PIN_FILE))))
    return out


def remove(location: str) -> None:
    """Delete a savepoint: renamed aside first, so that what is left of a removal cut
    short is never taken for a complete savepoint."""
    parent, base = os.path.split(location.rstrip("/"))
    doomed = os.path.join(parent, f".{base}.deleting")
    try:
        os.rename(location, doomed)
    except FileNotFoundError:
        doomed = doomed if os.path.exists(doomed) else ""
    except OSError:
        doomed = location
    if doomed:
        shutil.rmtree(doomed, ignore_errors=True)
