"""Streaming jobs under chaos: a feeder of known events for examples/streaming_events.py
and the exactly-once check of its Parquet sink against the expected aggregation."""
from __future__ import annotations

import collections
import datetime
import json
import os
import threading
import time
from typing import Callable

BASE_TS = datetime.datetime(2026, 1, 1)
FLUSH_TS = "2026-02-01T00:00:00"  # far ahead: the watermark passes every window fed


def write_events(directory: str, name: str, events: list[dict]) -> None:
    tmp = os.path.join(directory, f".{name}.tmp")
    with open(tmp, "w") as f:
        f.write("".join(json.dumps(e) + "\n" for e in events))
    os.replace(tmp, os.path.join(directory, f"{name}.json"))  # the source sees it whole


class EventFeed(threading.Thread):
    """Drops one file of 5 events every `period` seconds into `directory`."""

    def __init__(self, directory: str, period: float = 0.5, seed: int = 0) -> None:
        super().__init__(daemon=True)
        os.makedirs(directory, exist_ok=True)
        self.dir, self.period, self.seed = directory, period, seed
        self.events: list[dict] = []
        self.halt = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.halt.wait(self.period):
            evs = [{"user": f"u{(i * 5 + k + self.seed) % 3}",
                    "ts": (BASE_TS + datetime.timedelta(seconds=3 * (i * 5 + k))).isoformat(),
                    "amount": (k + self.seed) % 7} for k in range(5)]
            write_events(self.dir, f"f{i}", evs)
            self.events += evs
            i += 1

    def finish(self) -> None:
        """Stop feeding, then send the event that closes every window fed."""
        self.halt.set()
        self.join()
        write_events(self.dir, "flush", [{"user": "flush", "ts": FLUSH_TS, "amount": 0}])


def expected(events: list[dict]) -> dict:
    agg: dict = collections.defaultdict(lambda: [0, 0])
    for e in events:
        ts = datetime.datetime.fromisoformat(e["ts"])
        key = (ts.replace(second=0).isoformat(), e["user"])
        agg[key][0] += 1
        agg[key][1] += e["amount"]
    return {k: tuple(v) for k, v in agg.items()}


def sink_sql(sink: str) -> str:
    return (f"SELECT CAST(window_start AS STRING) AS w, user, events, amount "
            f"FROM parquet.`{sink}` WHERE user != 'flush'")


def check_sink(rows: list, events: list[dict]) -> dict:
    """Compare the sink's rows (w, user, events, amount) with the expected aggregation."""
    want = expected(events)
    seen = collections.Counter((datetime.datetime.fromisoformat(w).isoformat(), u)
                               for w, u, _, _ in rows)
    got = {(datetime.datetime.fromisoformat(w).isoformat(), u): (e, a) for w, u, e, a in rows}
    duplicated = sorted(k for k, n in seen.items() if n > 1)
    missing = sorted(k for k in want if k not in got)
    wrong = sorted(k for k in want if k in got and got[k] != want[k])
    extra = sorted(k for k in got if k not in want)
    errors = ([f"duplicated window {k}" for k in duplicated[:5]]
              + [f"missing window {k}" for k in missing[:5]]
              + [f"window {k}: {got[k]} != expected {want[k]}" for k in wrong[:5]]
              + [f"unexpected window {k}" for k in extra[:5]])
    return {"ok": not errors, "errors": errors, "windows": len(want), "rows": len(rows),
            "duplicated": len(duplicated), "missing": len(missing), "wrong": len(wrong)}


def wait_sink(query: Callable[[str], list], sink: str, events: list[dict],
              timeout: float = 600, stall: float = 120, interval: float = 1.0) -> dict:
    """Poll the sink until it holds every expected window; check it. A slow machine gets
    as long as the sink keeps growing: give up after `stall` seconds without a new row,
    or after `timeout` in all. A query that fails (OSError) counts as no new row."""
    want = len(expected(events))
    best: list = []
    start = grew = time.monotonic()
    while True:
        try:
            rows = query(sink_sql(sink))
        except OSError:
            rows = []
        now = time.monotonic()
        if len(rows) > len(best):
            best, grew = rows, now
        if len(best) >= want or now - grew > stall or now - start > timeout:
            return check_sink(best, events)
        time.sleep(interval)
