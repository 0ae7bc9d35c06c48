"""In a streaming job's process: a StreamingQueryListener that keeps each query's last
progress (jm/policy/jobs/progress.py: small, bounded) and a thread that writes it to
`progress.json` in the attempt's run dir at most once a second when it changed; the
JobMaster reads it and commits it with its status reports (at most once per
`jobmanager.streaming.progress-interval`).

The listener is added to the session the job uses, in either mode: in connect mode the
listener runs in this process (pyspark's client-side listener bus), in classic mode the
driver calls it through py4j. A script makes its own session: a thread waits for it
(`SparkSession._instantiatedSession`, or the Connect default session) and adds the
listener then. What the listener costs a micro-batch is measured by bench/listener.py.

In connect mode a query's console sink prints in the peer's shared Connect server, not
here: the listener says so in the job's log once per such query (jm/policy/jobs/sinknote.py).
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any, Callable, Optional

from jm.policy.jobs.progress import merged, query_entry
from jm.policy.jobs.sinknote import SPARK_LOG_ENV, console_note

PROGRESS_FILE = "progress.json"  # in the attempt's run dir; read by the JobMaster
WRITE_EVERY = 1.0   # seconds between two writes of the file, at most
ATTACH_POLL = 0.2   # seconds between two looks for a script's session


def raw_progress(p: Any) -> dict:
    """The fields query_entry reads, from a pyspark StreamingQueryProgress (classic or
    Connect: the same properties)."""
    states = []
    for op in getattr(p, "stateOperators", None) or []:
        states.append({"numRowsTotal": getattr(op, "numRowsTotal", None)})
    return {"name": getattr(p, "name", None), "id": str(getattr(p, "id", "") or ""),
            "batchId": getattr(p, "batchId", None),
            "numInputRows": getattr(p, "numInputRows", None),
            "inputRowsPerSecond": getattr(p, "inputRowsPerSecond", None),
            "processedRowsPerSecond": getattr(p, "processedRowsPerSecond", None),
            "batchDuration": getattr(p, "batchDuration", None),
            "stateOperators": states,
            "sink": getattr(getattr(p, "sink", None), "description", None)}


class ProgressKeeper(threading.Thread):
    """The job's last progress, written to `path` when it changed, at most every
    WRITE_EVERY s (the listener's callback only updates a dict: no I/O per batch)."""

    def __init__(self, path: str, clock: Callable[[], float] = time.time) -> None:
        super().__init__(name="jm-progress", daemon=True)
        self.path = path
        self.clock = clock
        self.done = threading.Event()
        self._lock = threading.Lock()
        self._progress: Optional[dict] = None
        self._written: Optional[dict] = None

    def note(self, raw: dict) -> None:
        entry = query_entry(raw, self.clock())
        with self._lock:
            self._progress = merged(self._progress, entry)

    def flush(self) -> None:
        with self._lock:
            progress = self._progress
        if progress is None or progress is self._written:
            return
        tmp = self.path + ".tmp"
        try:
            with open(tmp, "w") as f:
                json.dump(progress, f)
            os.replace(tmp, self.path)
            self._written = progress
        except OSError as exc:
            print(f"[jm] writing the streaming progress failed: {exc}", file=sys.stderr,
                  flush=True)

    def run(self) -> None:
        while not self.done.wait(WRITE_EVERY):
            self.flush()

    def stop(self) -> None:
        self.done.set()
        self.flush()


class SinkNotes:
    """Says once per query, in the job's log, where its console output goes when that is
    not the job's log (a connect-mode job: the peer's Connect server prints it)."""

    def __init__(self, connect: bool, spark_log: Optional[str]) -> None:
        self.connect, self.spark_log = connect, spark_log
        self.seen: set[str] = set()

    def check(self, raw: dict) -> None:
        query = str(raw.get("id") or raw.get("name") or "")
        if query in self.seen:
            return
        self.seen.add(query)
        label = raw.get("name") or query
        note = console_note(label, raw.get("sink"), self.connect, self.spark_log)
        if note:
            print(note, file=sys.stderr, flush=True)


def is_connect(spark: Any) -> bool:
    """Whether `spark` is a Spark Connect session (else a classic one)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def make_listener(keeper: ProgressKeeper, notes: Optional[SinkNotes] = None) -> Any:
    """A pyspark StreamingQueryListener feeding `keeper` (pyspark imported here only)."""
    from pyspark.sql.streaming.listener import StreamingQueryListener

    class _Listener(StreamingQueryListener):
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            try:
                raw = raw_progress(event.progress)
                if notes is not None:
                    notes.check(raw)
                keeper.note(raw)
            except Exception as exc:  # never the query's problem
                print(f"[jm] streaming progress not kept: {exc}", file=sys.stderr, flush=True)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    return _Listener()


class ListenerAttach(threading.Thread):
    """Adds the listener to the job's session as soon as there is one (`session()`
    returns it or None), then keeps the progress file up to date until stopped."""

    def __init__(self, run_dir: str, session: Callable[[], Any]) -> None:
        super().__init__(name="jm-progress-attach", daemon=True)
        self.keeper = ProgressKeeper(os.path.join(run_dir, PROGRESS_FILE))
        self.session = session
        self.attached = threading.Event()

    def run(self) -> None:
        while not self.keeper.done.is_set():
            spark = self.session()
            if spark is not None:
                notes = SinkNotes(is_connect(spark), os.environ.get(SPARK_LOG_ENV) or None)
                try:
                    spark.streams.addListener(make_listener(self.keeper, notes))
                except Exception as exc:
                    print(f"[jm] no streaming progress for this job: {exc}",
                          file=sys.stderr, flush=True)
                    return
                self.attached.set()
                self.keeper.start()
                return
            self.keeper.done.wait(ATTACH_POLL)

    def stop(self) -> None:
        self.keeper.stop()


def start_listener(run_dir: str, session: Callable[[], Any]) -> ListenerAttach:
    attach = ListenerAttach(run_dir, session)
    attach.start()
    return attach
