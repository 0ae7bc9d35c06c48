"""Flink's complete job overview (`GET /jobs/overview`, `/v1/jobs/overview`) at any number
of records without stalling the peer's event loop.

Flink's tools read the whole list, so it cannot be paged; but an ended job's row never
changes: an ended job's state is final (raft/state.py refuses every report, assignment
and cancel of it), its duration is fixed at its end, and it is released from its peer
before it ends. So each ended job's row is serialised once and kept as JSON bytes with
the record it was made from (a purged job, a snapshot installed: other records, made
again). A request then re-serialises only
the live jobs (a few, bounded by the slots) and joins bytes. A cold cache (a peer just
started, a snapshot just installed) is filled in chunks, handing the loop back between
them, so a 50,000-job overview costs the loop a few milliseconds at a time."""
from __future__ import annotations

import asyncio
import json
from typing import Any, Callable, Iterable, Optional

from jm.wire import views
from raft import state as S

CHUNK = 250  # rows serialised between two hand-backs of the event loop
SCAN = 5000  # records looked at (or rows joined) between two hand-backs


def _dump(row: dict) -> bytes:
    return json.dumps(row, separators=(",", ":")).encode()


class OverviewCache:
    """Rows of ended jobs as JSON bytes (job id -> (record, bytes)); pruned of purged
    jobs."""

    def __init__(self) -> None:
        self._rows: dict[str, tuple[Any, bytes]] = {}
        self.hits = self.misses = 0

    async def body(self, read: Callable[[], Any], now: float,
                   select: Optional[Callable[[Any], Iterable[Any]]] = None) -> list[bytes]:
        """`{"jobs": [...]}` (JSON, in blocks to write one after the other) of the jobs
        `select(state)` yields (default: every job, in submission order). `read` is the
        replica's read lock (a context manager yielding the state), held only to list the
        jobs and serialise the live ones."""
        with read() as st:
            jobs = list(st.jobs.values() if select is None else select(st))
        # an ended job's record is final: read without the lock, a slice at a time
        live_jobs: list[Any] = []
        for lo in range(0, len(jobs), SCAN):
            live_jobs += [j for j in jobs[lo:lo + SCAN] if j.status not in S.TERMINAL]
            await asyncio.sleep(0)
        with read():  # a live job's duration grows: fresh each time, read under the lock
            live = {j.id: _dump(views.job_row(j, now)) for j in live_jobs}
        cached = self._rows
        parts: list[Any] = []
        for lo in range(0, len(jobs), SCAN):
            parts += [live[j.id] if j.id in live else
                      (c[1] if (c := cached.get(j.id)) is not None and c[0] is j else None)
                      for j in jobs[lo:lo + SCAN]]
            await asyncio.sleep(0)
        missing = [i for i, part in enumerate(parts) if part is None]
        self.misses += len(missing)
        self.hits += len(parts) - len(missing) - len(live)
        for n, i in enumerate(missing, 1):
            job = jobs[i]
            row = _dump(views.job_row(job, now))  # ended: `now` does not enter the row
            cached[job.id] = (job, row)
            parts[i] = row
            if n % CHUNK == 0:
                await asyncio.sleep(0)
        if select is None and len(cached) > len(jobs) - len(live):  # purged, or live again
            ended = {j.id for j in jobs if j.id not in live}
            for job_id in [j for j in cached if j not in ended]:
                del cached[job_id]
        out = [b'{"jobs":[']  # in blocks: one 25 MB buffer would stall the loop to fill
        for lo in range(0, len(parts), SCAN):
            out.append((b"," if lo else b"") + b",".join(parts[lo:lo + SCAN]))
            await asyncio.sleep(0)
        out.append(b"]}")
        return out

    async def fill(self, read: Callable[[], Any], now: float) -> int:
        """Make the rows of the jobs that ended since the last fill (the tail of the
        state's ended jobs, back to the first one cached from the same record: O(new),
        not O(all)), a slice at a time, without building a body; forget purged ones.
        Returns how many rows it made."""
        cached = self._rows
        todo: list = []
        with read() as st:
            for jid in reversed(st.ended):
                job = st.jobs.get(jid)
                if job is None:
                    continue
                c = cached.get(jid)
                if c is not None and c[0] is job:
                    break
                todo.append(job)
            purged = len(cached) + len(todo) > len(st.ended)
            keep = set(st.ended) if purged else None
        for n, job in enumerate(reversed(todo), 1):
            cached[job.id] = (job, _dump(views.job_row(job, now)))
            if n % CHUNK == 0:
                await asyncio.sleep(0)
        if keep is not None:
            for job_id in [j for j in cached if j not in keep]:
                del cached[job_id]
        return len(todo)
