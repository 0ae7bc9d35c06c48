"""Job logs: each run of an attempt writes <log dir>/jobs/<job>/attempt-<epoch>-<run>.log on
the peer that ran it. An attempt's log is those files in run order, read as one stream.

Paths are built only from a job id that exists in the replicated state (validated at
submission) and an integer attempt, never from request text, so a request cannot reach
outside the log directory.

A run's file is capped (`jobmanager.job-log.max-size`, `cap_file`, called by the peer's
janitor): over the cap it is cut in place to its first quarter, a marker line saying how
many bytes were dropped, and its last half. The job process keeps appending (O_APPEND)
while it is cut; a reader that follows by offset finds the file shorter and goes on from
its new end. An attempt whose job restarts over and over keeps its first and newest runs'
logs and at most the cap's worth of the runs in between (`trim_runs`).
"""
from __future__ import annotations

import os
import re

from jm.policy.jobs import cleanup

MAX_CHUNK = 1 << 20  # bytes returned at most per request
_RUN = re.compile(r"^attempt-(\d+)-(\d+)\.log$")


def attempt_files(log_dir: str, job_id: str, attempt: int) -> list[str]:
    folder = os.path.join(log_dir, "jobs", job_id)
    runs = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for name in names:
        m = _RUN.match(name)
        if m and int(m.group(1)) == attempt:
            runs.append((int(m.group(2)), os.path.join(folder, name)))
    return [p for _, p in sorted(runs)]


def attempts_runs(log_dir: str, job_id: str) -> dict[int, list[tuple[int, str]]]:
    """The run logs of each attempt of a job: attempt -> [(restart index, path)]."""
    folder = os.path.join(log_dir, "jobs", job_id)
    out: dict[int, list[tuple[int, str]]] = {}
    try:
        names = os.listdir(folder)
    except OSError:
        return out
    for name in names:
        m = _RUN.match(name)
        if m:
            out.setdefault(int(m.group(1)), []).append((int(m.group(2)),
                                                        os.path.join(folder, name)))
    return out


def trim_runs(log_dir: str, job_id: str, cap: int) -> list[str]:
    """Delete the oldest run logs between an attempt's first and newest run while the
    ones in between hold more than `cap` bytes (a job restarting over and over); returns
    the files deleted. Those runs had ended: only the newest run's process writes."""
    gone = []
    for runs in attempts_runs(log_dir, job_id).values():
        sizes = []
        for run, path in runs:
            try:
                sizes.append((run, os.path.getsize(path)))
            except OSError:
                pass
        paths = dict(runs)
        for run in cleanup.runs_beyond(sizes, cap):
            try:
                os.remove(paths[run])
                gone.append(paths[run])
            except OSError:
                pass
    return gone


def _sizes(files: list[str]) -> list[int]:
    out = []
    for p in files:
        try:
            out.append(os.path.getsize(p))
        except OSError:
            out.append(0)
    return out


def _bytes(files: list[str], sizes: list[int], offset: int, want: int) -> bytes:
    chunks, pos = [], 0
    for p, n in zip(files, sizes):
        lo, hi = max(offset, pos), min(offset + want, pos + n)
        if lo < hi:
            try:
                with open(p, "rb") as f:
                    f.seek(lo - pos)
                    chunks.append(f.read(hi - lo))
            except OSError:
                pass
        pos += n
    return b"".join(chunks)


def read(files: list[str], offset: int = 0, tail: int | None = None,
         limit: int = MAX_CHUNK) -> dict:
    """Read the concatenation of `files` from byte `offset` (or its last `tail` lines),
    at most `limit` bytes. Returns text, size, offset, next-offset and truncated."""
    sizes = _sizes(files)
    size = sum(sizes)
    if tail is not None:
        start = max(0, size - limit)
        offset = start + _tail_start(_bytes(files, sizes, start, size - start), tail)
    offset = max(0, min(offset, size))
    data = _bytes(files, sizes, offset, min(limit, size - offset))
    return {"text": data.decode("utf-8", "replace"), "size": size, "offset": offset,
            "next-offset": offset + len(data), "truncated": offset + len(data) < size}


def _tail_start(blob: bytes, lines: int) -> int:
    """Index in `blob` where its last `lines` lines start."""
    if lines <= 0:
        return len(blob)
    cut = len(blob) - 1 if blob.endswith(b"\n") else len(blob)
    for _ in range(lines):
        cut = blob.rfind(b"\n", 0, cut)
        if cut < 0:
            return 0
    return cut + 1


def cap_file(path: str, cap: int, rounds: int = 3) -> int:
    """Cut the log at `path` to below `cap` bytes if it is over (see the module doc);
    returns the bytes dropped now (0: under the cap, or gone). The writer appends all
    the while: what it appended during the cut is copied along, up to the last instant
    (the bytes appended between the last look and the truncation are lost)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return 0
    try:
        size = os.fstat(fd).st_size
        planned = cleanup.plan_cut(size, cap, os.pread(fd, cleanup.head_window(cap), 0))
        if planned is None:
            return 0
        cut, old_marker = planned
        cut = cleanup.align_tail(cut, os.pread(fd, min(size - cut.tail, 1 << 16), cut.tail))
        dropped = cut.dropped(old_marker)
        mark = cleanup.marker(dropped, cap)
        pos = cut.head + len(mark)
        src = cut.tail
        os.pwrite(fd, mark, cut.head)
        for _ in range(rounds + 1):  # copy the tail down, then what was appended meanwhile
            while src < size:
                chunk = os.pread(fd, min(size - src, 1 << 20), src)
                if not chunk:
                    break
                os.pwrite(fd, chunk, pos)
                src, pos = src + len(chunk), pos + len(chunk)
            grown = os.fstat(fd).st_size
            if grown <= size:
                break
            size = grown
        os.ftruncate(fd, pos)
        return dropped
    except OSError:
        return 0
    finally:
        os.close(fd)
