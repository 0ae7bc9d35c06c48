"""Job logs: each run of an attempt writes <log dir>/jobs/<job>/attempt-<epoch>-<run>.log on
the peer that ran it. An attempt's log is those files in run order, read as one stream.

Paths are built only from a job id that exists in the replicated state (validated at
submission) and an integer attempt, never from request text, so a request cannot reach
outside the log directory.
"""
from __future__ import annotations

import os
import re

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
