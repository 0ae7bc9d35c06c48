"""A streaming job's last progress (pure): what a StreamingQueryListener in the job process
keeps of each query's progress, bounded, and how often the peer commits it to the
replicated state (at most once per interval per job, the newest one: coalesced).

The shape, as the job record (`JobRecord.progress`) and the read models carry it:

    {"time": <wall time of the newest progress>,
     "queries": [{"name", "batch", "time", "input-rows", "input-rows-per-second",
                  "processed-rows-per-second", "batch-duration-ms", "state-rows"}, ...]}

at most MAX_QUERIES queries (the newest), names cut to MAX_NAME characters, numbers only
(a non-finite rate becomes None): a few hundred bytes per job, whatever the job does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Optional

MAX_QUERIES = 8     # per job: the queries that reported last
MAX_NAME = 100      # characters of a query's name
MAX_SIZE = 4096     # bytes of a job's progress as JSON, at most (checked by `bounded`)

FIELDS = ("batch", "time", "input-rows", "input-rows-per-second",
          "processed-rows-per-second", "batch-duration-ms", "state-rows")


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def query_entry(raw: dict, now: float) -> dict:
    """One query's progress event (a mapping of Spark's StreamingQueryProgress fields:
    name, id, batchId, numInputRows, inputRowsPerSecond, processedRowsPerSecond,
    batchDuration, stateOperators[].numRowsTotal) as the small entry kept of it."""
    name = raw.get("name") or raw.get("id") or "query"
    states = raw.get("stateOperators") or []
    rows = [_number(op.get("numRowsTotal")) for op in states if isinstance(op, dict)]
    rate_in, rate_done = (_number(raw.get("inputRowsPerSecond")),
                          _number(raw.get("processedRowsPerSecond")))
    return {"name": str(name)[:MAX_NAME],
            "batch": _number(raw.get("batchId")),
            "time": now,
            "input-rows": _number(raw.get("numInputRows")),
            "input-rows-per-second": None if rate_in is None else round(rate_in, 3),
            "processed-rows-per-second": None if rate_done is None else round(rate_done, 3),
            "batch-duration-ms": _number(raw.get("batchDuration")),
            "state-rows": sum(r for r in rows if r is not None) if states else None}


def merged(progress: Optional[dict], entry: dict) -> dict:
    """The job's progress with one query's new entry: that query's previous entry
    replaced, the newest MAX_QUERIES queries kept, ordered by name."""
    queries = [q for q in (progress or {}).get("queries", []) if q.get("name") != entry["name"]]
    queries.append(entry)
    queries.sort(key=lambda q: q.get("time") or 0)
    kept = sorted(queries[-MAX_QUERIES:], key=lambda q: q["name"])
    return {"time": entry["time"], "queries": kept}


def bounded(progress: Any) -> Optional[dict]:
    """A progress as the state keeps it, from whatever a report carries (a job process
    writes the file the peer reads): known fields only, numbers only, bounded; None if
    it is not a progress."""
    if not isinstance(progress, dict) or not isinstance(progress.get("queries"), list):
        return None
    queries = []
    for q in progress["queries"][-MAX_QUERIES:]:
        if not isinstance(q, dict):
            continue
        entry = {"name": str(q.get("name") or "query")[:MAX_NAME]}
        entry.update({k: _number(q.get(k)) for k in FIELDS})
        queries.append(entry)
    return {"time": _number(progress.get("time")), "queries": queries}


@dataclass(frozen=True)
class ProgressGate:
    """When the peer commits a job's progress: the first at once, then at most one per
    `interval` seconds, the newest of those that came in between (coalesced); an
    unchanged progress is not sent again. `now`: a monotonic clock."""
    interval: float
    sent: Optional[dict] = None
    sent_at: Optional[float] = None
    pending: Optional[dict] = None

    def offer(self, progress: dict) -> "ProgressGate":
        if progress == self.sent:
            return replace(self, pending=None)
        return replace(self, pending=progress)

    def take(self, now: float) -> tuple["ProgressGate", Optional[dict]]:
        """(the next gate, the progress to commit now or None)."""
        if self.pending is None:
            return self, None
        if self.sent_at is not None and now - self.sent_at < self.interval:
            return self, None
        return ProgressGate(self.interval, self.pending, now, None), self.pending

    def wait(self, now: float) -> Optional[float]:
        """Seconds until a pending progress may go (0: now), None if nothing waits."""
        if self.pending is None:
            return None
        if self.sent_at is None:
            return 0.0
        return max(0.0, self.interval - (now - self.sent_at))


def _ms(t: Any) -> Optional[int]:
    return int(t * 1000) if isinstance(t, (int, float)) and not isinstance(t, bool) else None


def progress_view(progress: Optional[dict]) -> Optional[dict]:
    """The job's last progress as the REST API shows it (times in ms, as Flink's)."""
    if not progress:
        return None
    queries = [dict(q, time=_ms(q.get("time"))) for q in progress.get("queries") or []]
    return {"time": _ms(progress.get("time")), "queries": queries}
