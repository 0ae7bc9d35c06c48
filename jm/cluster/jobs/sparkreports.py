"""The Spark application of a job's running attempt, reported to the replicated state as
RUNNING details (id, UI, executors, a note while it waits for resources): read from the
file a classic-mode job process writes, or heard from the peer's Connect server for a
connect-mode job. A collaborator of the JobMaster; the details are informative: a
failure to report them never fails the attempt."""
from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, Awaitable, Callable, Optional

from jm.cluster.jobs.jobfiles import read_json
from jm.policy.jobs.bounds import json_size, storable
from jm.policy.jobs.progress import MAX_SIZE as MAX_PROGRESS_SIZE, ProgressGate, bounded
from jm.runtime.progress import PROGRESS_FILE
from jm.runtime.sparkapp import INFO_FILE

MAX_INFO_SIZE = 16 * 1024  # bytes of an attempt's Spark details (spark.json) kept


class SparkReports:
    def __init__(self, job_id: str, send: Callable[[dict], Awaitable[Any]],
                 log: logging.LoggerAdapter) -> None:
        """`send(info)`: the RUNNING report of these details; its Result."""
        self.job_id = job_id
        self.send = send
        self.log = log
        self.told_waiting = False      # its server's waiting note was reported
        self.tasks: set[asyncio.Task] = set()
        self.watch: Optional[asyncio.Task] = None

    def watch_file(self, run_dir: str) -> None:
        """Report the details a classic-mode job process writes, as they change."""
        self.watch = asyncio.create_task(self._watch(os.path.join(run_dir, INFO_FILE)))

    def unwatch(self) -> None:
        if self.watch is not None:
            self.watch.cancel()
            self.watch = None

    def running(self) -> None:
        """A new attempt's RUNNING is committed: nothing said of its server yet."""
        self.told_waiting = False

    def note_server(self, info: dict) -> None:
        """A connect-mode job runs on its peer's Connect server: while that server's
        application waits for executors on the Spark cluster, so does the job, and its
        attempt says so (reported when the note appears and when it goes, nothing
        otherwise: no write per job on the way in)."""
        waiting = bool(info.get("waiting"))
        if waiting or self.told_waiting:
            self.told_waiting = waiting
            # sent now, in order: it cannot overtake the attempt's end
            task = asyncio.create_task(self._report(self._send(info)))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    def pending(self) -> list[asyncio.Task]:
        return [t for t in [self.watch, *self.tasks] if t is not None and not t.done()]

    async def _watch(self, path: str) -> None:
        last: Any = None
        delay = 0.1
        while True:
            await asyncio.sleep(delay)
            info, _ = await asyncio.to_thread(read_json, path, MAX_INFO_SIZE)
            if info is not None and info != last:
                last = info
                if not await self._report(self._send(info)):
                    return
            delay = min(1.0, delay * 1.5)

    def _send(self, info: dict) -> Awaitable[Any]:
        info = storable({k: str(v)[:500] if isinstance(v, str) else v for k, v in info.items()})
        if json_size(info) > MAX_INFO_SIZE:  # bounded: only its plain fields
            info = {k: v for k, v in info.items() if not isinstance(v, (dict, list))}
        return self.send(info)

    async def _report(self, sent: Awaitable[Any]) -> bool:
        """Await a report of Spark details for the running attempt; False once fenced."""
        return await informative(sent, self.log, f"job {self.job_id}: reporting its Spark "
                                 "application", f"report RUNNING for {self.job_id} refused")


class ProgressReports:
    """A streaming job's last progress, from the file its job process writes
    (jm/runtime/progress.py), committed with a status report at most once per
    `interval` s, the newest one (jm/policy/jobs/progress.py ProgressGate). Informative like
    the Spark details: a failure to report it never fails the attempt."""

    POLL = 1.0  # seconds between two looks at the file

    def __init__(self, job_id: str, send: Callable[[dict], Awaitable[Any]], interval: float,
                 log: logging.LoggerAdapter, clock: Callable[[], float]) -> None:
        self.job_id, self.send, self.interval, self.log = job_id, send, interval, log
        self.clock = clock
        self.watch: Optional[asyncio.Task] = None

    def watch_file(self, run_dir: str) -> None:
        self.unwatch()
        self.watch = asyncio.create_task(self._watch(os.path.join(run_dir, PROGRESS_FILE)))

    def unwatch(self) -> None:
        if self.watch is not None:
            self.watch.cancel()
            self.watch = None

    def pending(self) -> list[asyncio.Task]:
        return [self.watch] if self.watch is not None and not self.watch.done() else []

    async def _watch(self, path: str) -> None:
        gate = ProgressGate(self.interval)
        seen: Any = None
        while True:
            await asyncio.sleep(self.POLL)  # (a look at the file: no Raft write)
            progress, _ = await asyncio.to_thread(read_json, path, MAX_PROGRESS_SIZE)
            progress = bounded(progress)
            if progress is not None and progress != seen:
                seen = progress
                gate = gate.offer(progress)
            gate, out = gate.take(self.clock())
            if out is not None and not await _reported(self, out):
                return


async def _reported(reports: ProgressReports, progress: dict) -> bool:
    """Commit one progress; False once fenced (the attempt is over)."""
    return await informative(reports.send(progress), reports.log,
                             f"job {reports.job_id}: reporting its streaming progress",
                             f"progress of {reports.job_id} refused")


async def informative(sent: Awaitable[Any], log: Any, failing: str, refused: str) -> bool:
    """Await a report that only informs (Spark details, progress): an error is logged,
    never the attempt's failure; False once the attempt is fenced (the report is stale)."""
    try:
        r = await sent
    except Exception:
        log.exception("%s", failing)
        return True
    if not r.ok and r.code == "stale":
        return False
    if not r.ok:
        log.warning("%s: %s", refused, r.error)
    return True
