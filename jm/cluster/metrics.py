"""A small Prometheus registry per peer (text exposition format 0.0.4), so that peers of
one process (MiniCluster, tests) never share counters. Counters and histograms count
this peer's events; gauges are read at scrape time from the peer and its replica."""
from __future__ import annotations

import math
import threading
from typing import Callable, Iterable

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0)


def _labels(names: tuple, values: tuple) -> str:
    if not names:
        return ""
    parts = []
    for n, v in zip(names, values):
        v = str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
        parts.append(f'{n}="{v}"')
    return "{" + ",".join(parts) + "}"


def _num(x: float) -> str:
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return repr(float(x)) if not float(x).is_integer() else str(int(x))


class Counter:
    def __init__(self, name: str, help_: str, labels: tuple = ()) -> None:
        self.name, self.help, self.labels = name, help_, labels
        self.values: dict[tuple, float] = {}
        self._lock = threading.Lock()

    def inc(self, amount: float = 1.0, *labels: str) -> None:
        with self._lock:
            self.values[labels] = self.values.get(labels, 0.0) + amount

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} counter"
        if not self.values and not self.labels:
            yield f"{self.name} 0"
        for labels, v in sorted(self.values.items()):
            yield f"{self.name}{_labels(self.labels, labels)} {_num(v)}"


class Histogram:
    def __init__(self, name: str, help_: str, labels: tuple = (),
                 buckets: tuple = LATENCY_BUCKETS) -> None:
        self.name, self.help, self.labels, self.buckets = name, help_, labels, buckets
        self.series: dict[tuple, list] = {}  # labels -> [bucket counts..., sum, count]
        self._lock = threading.Lock()

    def observe(self, value: float, *labels: str) -> None:
        with self._lock:
            s = self.series.setdefault(labels, [0] * len(self.buckets) + [0.0, 0])
            for i, b in enumerate(self.buckets):
                if value <= b:
                    s[i] += 1
            s[-2] += value
            s[-1] += 1

    def render(self) -> Iterable[str]:
        yield f"# HELP {self.name} {self.help}"
        yield f"# TYPE {self.name} histogram"
        for labels, s in sorted(self.series.items()):
            for i, b in enumerate(self.buckets):
                yield (f"{self.name}_bucket{_labels(self.labels + ('le',), labels + (_num(b),))}"
                       f" {s[i]}")
            yield f"{self.name}_bucket{_labels(self.labels + ('le',), labels + ('+Inf',))} {s[-1]}"
            yield f"{self.name}_sum{_labels(self.labels, labels)} {_num(s[-2])}"
            yield f"{self.name}_count{_labels(self.labels, labels)} {s[-1]}"


class Gauges:
    """Gauges computed by a callback at scrape time: name -> (help, [(labels, value)])."""

    def __init__(self, collect: Callable[[], dict]) -> None:
        self.collect = collect

    def render(self) -> Iterable[str]:
        for name, (help_, label_names, samples) in sorted(self.collect().items()):
            yield f"# HELP {name} {help_}"
            yield f"# TYPE {name} gauge"
            for labels, v in samples:
                yield f"{name}{_labels(label_names, labels)} {_num(v)}"


class PeerMetrics:
    """The metrics of one JobManager peer."""

    def __init__(self) -> None:
        self.restarts = Counter("jm_job_restarts_total",
                                "Job restarts reported by this peer's JobMasters")
        self.moves = Counter("jm_job_moves_total",
                             "Planned moves of jobs away from this peer (rebalance, drain)")
        self.failovers = Counter("jm_failovers_detected_total",
                                 "Peers this peer (as leader) declared dead")
        self.placement = Histogram("jm_placement_latency_seconds",
                                   "From a job waiting (CREATED) to its assignment, on the "
                                   "leader")
        self.rest = Histogram("jm_rest_request_duration_seconds",
                              "REST request latency on this peer", ("method", "route", "code"))
        self.gauges: list[Gauges] = []

    def render(self) -> str:
        lines: list[str] = []
        for m in (self.restarts, self.moves, self.failovers, self.placement, self.rest,
                  *self.gauges):
            lines.extend(m.render())
        return "\n".join(lines) + "\n"
