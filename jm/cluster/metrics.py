"""The Prometheus metrics of one peer, through `prometheus_client`.

Every peer has its own CollectorRegistry (in-process clusters, MiniCluster and the tests,
run several peers in one process: they never share a counter). It holds:

* the process, platform and GC collectors (`process_resident_memory_bytes`: the control
  plane's RSS; `python_gc_*`, `python_info`);
* this peer's counters and histograms (restarts, moves, failovers detected, placement
  latency, REST latency per route);
* the gauges read at scrape time from the peer and its replica (peer_gauges).

Every series carries a `peer` label (the node id) except the cluster-wide ones, named
`jm_cluster_*`, which only the Raft leader exports (a follower exports none), so that a
`sum()` over every peer's series is right. `render(accept)` negotiates the format:
OpenMetrics when the scraper asks for `application/openmetrics-text`, else the classic
text format 0.0.4."""
from __future__ import annotations

import logging
from typing import Any, Callable, Iterable, Optional

from prometheus_client import (CollectorRegistry, Counter, GCCollector, Histogram,
                               PlatformCollector, ProcessCollector)
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from jm.policy.jobs.vocab import TERMINAL

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                   10.0)
CLUSTER_PREFIX = "jm_cluster_"  # cluster-wide series: exported by the leader only, no peer

# name -> (help, label names, [(label values, value)]), as peer_gauges returns them
Gauges = dict[str, tuple[str, tuple, list]]


def cluster_gauges(st: Any) -> Gauges:
    """The cluster-wide numbers of a replica's state (pure): jobs by state, peers by state,
    slots of the alive peers and those used. Only the leader exports them."""
    from jm.wire import views
    jobs = dict(st.status_counts)  # kept by the state as jobs change
    peers: dict[str, int] = {}
    for p in st.peers.values():
        k = views.peer_state(st, p)
        peers[k] = peers.get(k, 0) + 1
    alive = st.alive_peers()
    return {
        "jm_cluster_jobs": ("Jobs by state in the cluster (exported by the Raft leader only)",
                            ("state",), [((k,), v) for k, v in sorted(jobs.items())]),
        "jm_cluster_peers": ("Peers by state in the cluster (exported by the Raft leader "
                             "only)", ("state",), [((k,), v) for k, v in sorted(peers.items())]),
        "jm_cluster_slots": ("Slots of the alive peers (exported by the Raft leader only)", (),
                             [((), sum(p.slots for p in alive))]),
        "jm_cluster_slots_used": ("Slots used on the alive peers (exported by the Raft leader "
                                  "only)", (), [((), sum(st.slots_used(p.id) for p in alive))]),
    }


JOB_LABELS = ("job", "tenant")


def job_gauges(jobs: Iterable[Any]) -> Gauges:
    """Per-job series of the streaming jobs assigned to this peer (pure; `jobs`: their
    records): `jm_job_up` (1 while RUNNING) and, from the job's last progress (summed or
    the latest over its queries), the last batch's time, rows per second in and
    processed, batch duration and state rows. A job's series go when it leaves this
    peer (ended, moved): the labels stay bounded by the jobs running here."""
    names = {
        "jm_job_up": "1 if this streaming job is RUNNING on this peer, 0 while it restarts",
        "jm_job_last_batch_timestamp_seconds": "Wall time of the job's last micro-batch "
                                               "progress (the latest of its queries)",
        "jm_job_input_rows_per_second": "Input rows per second of the job's last "
                                        "micro-batches (sum over its queries)",
        "jm_job_processed_rows_per_second": "Processed rows per second of the job's last "
                                            "micro-batches (sum over its queries)",
        "jm_job_batch_duration_seconds": "Duration of the job's last micro-batch (the "
                                         "longest of its queries')",
        "jm_job_state_rows": "Rows in the state stores of the job's queries (sum)"}
    out: dict[str, list] = {n: [] for n in names}
    for job in jobs:
        labels = (job.id, job.tenant or "default")
        running = job.status == "RUNNING"
        out["jm_job_up"].append((labels, int(running)))
        queries = ((job.progress or {}).get("queries") or []) if running else []
        for name, key, pick, scale in _PROGRESS_SERIES:
            values = [q.get(key) for q in queries]
            values = [v for v in values if isinstance(v, (int, float))]
            if values:
                out[name].append((labels, pick(values) * scale))
    return {n: (names[n], JOB_LABELS, samples) for n, samples in out.items()}


_PROGRESS_SERIES = (("jm_job_last_batch_timestamp_seconds", "time", max, 1),
                    ("jm_job_input_rows_per_second", "input-rows-per-second", sum, 1),
                    ("jm_job_processed_rows_per_second", "processed-rows-per-second", sum, 1),
                    ("jm_job_batch_duration_seconds", "batch-duration-ms", max, 0.001),
                    ("jm_job_state_rows", "state-rows", sum, 1))


def peer_gauges(svc: Any, leader: Optional[str]) -> Gauges:
    """This peer's gauges (labelled with the peer by PeerMetrics), and the cluster-wide
    jm_cluster_* ones only if this peer is the leader (a follower exports none: sum()
    over peers is right). `svc`: the peer's GatewayServices."""
    import os
    raft, conf, node = svc.raft, svc.conf, svc.node
    with raft.read() as st:
        cluster = cluster_gauges(st) if leader == node else {}
        used = st.slots_used(node)
        mine = st.jobs_of(node)
        jobs = job_gauges([j for j in (st.jobs.get(i) for i in mine) if j is not None
                           and j.streaming and j.node == node
                           and j.status not in TERMINAL])
        mine = len(mine)
    sync = raft.syncobj
    # (at share-level tenant or job there is no peer engine: engines start with their work)
    spark_up = svc.spark.ready.is_set() if svc.spark else bool(
        conf.spark.remote or (svc.engines is not None and svc.engines.embedded))
    journal = raft.journal_stats()
    snap = raft.snapshot_stats()
    disk = []
    for kind, where in (("data", svc.data_dir), ("log", svc.log_dir)):
        try:
            fs = os.statvfs(where)
        except OSError:
            continue
        disk.append((kind, fs.f_bavail * fs.f_frsize, fs.f_blocks * fs.f_frsize))

    def one(help_: str, value: Any) -> tuple[str, tuple, list]:
        return help_, (), [((), value)]
    return {
        **cluster,
        **jobs,
        "jm_raft_term": one("Raft term of this peer's replica", sync.raftCurrentTerm),
        "jm_raft_commit_index": one("Raft commit index of this peer's replica",
                                    sync.raftCommitIndex),
        "jm_raft_last_applied": one("Raft entries applied here", sync.raftLastApplied),
        "jm_raft_leader": one("1 if this peer is the Raft leader", int(leader == node)),
        "jm_raft_disk_problem": one("1 if this peer's Raft journal cannot be written",
                                    int(raft.disk_trouble() is not None)),
        "jm_job_processes": one("Job processes alive on this peer", svc.executor.running()),
        "jm_jobs_assigned": one("Jobs assigned to this peer", mine),
        "jm_slots_used": one("Slots used on this peer (with moves on their way)", used),
        "jm_slots": one("Slots of this peer", conf["jobmanager.slots"]),
        "jm_spark_connect_up": one("1 if this peer's Spark Connect is ready", int(spark_up)),
        "jm_lease_valid": one("1 if this peer holds a valid lease", int(svc.lease.term.valid())),
        "jm_lease_age_max_seconds": one("The oldest this peer's lease got before a renewal, "
                                        "since it started (it fences at "
                                        "jobmanager.lease-timeout)", svc.lease.term.age_max),
        "jm_disk_free_bytes": ("Room left for this peer on the file system of its data "
                               "or log folder", ("dir",), [((k,), f) for k, f, _ in disk]),
        "jm_disk_size_bytes": ("Size of the file system of this peer's data or log folder",
                               ("dir",), [((k,), t) for k, _, t in disk]),
        "jm_disk_low": one("1 if the data or log folder has less room than "
                           "jobmanager.disk.min-free", int(bool(svc.disk_low()))),
        "jm_raft_fsyncs_total": one("fsyncs of this peer's Raft journal (raft.fsync)",
                                    journal.get("fsyncs", 0)),
        "jm_raft_fsynced_entries_total": one("Raft entries those fsyncs made durable",
                                             journal.get("entries", 0)),
        "jm_raft_fsync_seconds_total": one("Time spent in those fsyncs",
                                           journal.get("fsync-seconds", 0.0)),
        "jm_raft_snapshots_total": one("Snapshots of the Raft log this peer wrote",
                                       snap.taken),
        "jm_raft_snapshot_seconds": one("The last snapshot: from its start until written",
                                        snap.seconds),
        "jm_raft_snapshot_start_seconds": one("The last snapshot: its start on the Raft "
                                              "thread (the fork)", snap.start_seconds),
    }


def families(node: str, gauges: Gauges) -> list[Metric]:
    """Metric families of scrape-time gauges (pure): a name ending in `_total` is a counter;
    every family but the cluster-wide ones (`jm_cluster_*`) gets the `peer` label."""
    out: list[Metric] = []
    for name, (help_, label_names, samples) in sorted(gauges.items()):
        own = not name.startswith(CLUSTER_PREFIX)
        names = (("peer",) if own else ()) + tuple(label_names)
        cls = CounterMetricFamily if name.endswith("_total") else GaugeMetricFamily
        fam = cls(name, help_, labels=names)
        for values, v in samples:
            fam.add_metric(((node,) if own else ()) + tuple(str(x) for x in values), float(v))
        out.append(fam)
    return out


class _ScrapeGauges:
    """A collector reading the gauges at each scrape; a failing read costs these series
    for that scrape (logged), never the whole /metrics."""

    def __init__(self, node: str, read: Callable[[], Gauges]) -> None:
        self.node, self.read = node, read

    def collect(self) -> Iterable[Metric]:
        try:
            gauges = self.read()
        except Exception:
            log.warning("metrics: reading the peer's gauges failed", exc_info=True)
            return []
        return families(self.node, gauges)


class _PeerLabelled:
    """Another collector's families with a `peer` label added to every sample (process,
    platform and GC metrics: per peer like the rest)."""

    def __init__(self, inner: Any, node: str) -> None:
        self.inner, self.node = inner, node

    def collect(self) -> Iterable[Metric]:
        for fam in self.inner.collect():
            out = Metric(fam.name, fam.documentation, fam.type, fam.unit)
            out.samples = [s._replace(labels={"peer": self.node, **s.labels})
                           for s in fam.samples]
            yield out


def _series(cache: dict[tuple, Any], family: Any, *labels: str) -> Any:
    """`family`'s series of `labels`, kept in `cache` (prometheus_client's labels() looks
    it up under a lock each time: on every request, once a series is enough)."""
    series = cache.get(labels)
    if series is None:
        series = cache[labels] = family.labels(*labels)
    return series


class PeerMetrics:
    """The metrics of one JobManager peer (node id `node`); `read_gauges` returns the
    scrape-time gauges (PeerGateway.gauges)."""

    def __init__(self, node: str, read_gauges: Optional[Callable[[], Gauges]] = None) -> None:
        self.node = node
        self.registry = CollectorRegistry(auto_describe=False)
        scratch = CollectorRegistry(auto_describe=False)  # they insist on registering
        for inner in (ProcessCollector(registry=scratch), PlatformCollector(registry=scratch),
                      GCCollector(registry=scratch)):
            self.registry.register(_PeerLabelled(inner, node))
        reg = self.registry
        self.restarts = Counter("jm_job_restarts", "Job restarts reported by this peer's "
                                "JobMasters", ("peer",), registry=reg).labels(node)
        self.moves = Counter("jm_job_moves", "Planned moves of jobs away from this peer "
                             "(rebalance, drain)", ("peer",), registry=reg).labels(node)
        self.failovers = Counter("jm_failovers_detected", "Peers this peer (as leader) "
                                 "declared dead", ("peer",), registry=reg).labels(node)
        self.placement = Histogram("jm_placement_latency_seconds", "From a job waiting "
                                   "(CREATED) to its assignment, on the leader", ("peer",),
                                   registry=reg, buckets=LATENCY_BUCKETS).labels(node)
        self._rest = Histogram("jm_rest_request_duration_seconds", "REST request latency on "
                               "this peer", ("peer", "method", "route", "code"),
                               registry=reg, buckets=LATENCY_BUCKETS)
        self.loop_lag = Histogram("jm_event_loop_lag_seconds", "How late this peer's event "
                                  "loop ran a timer (every 100 ms; jm/cluster/looplag.py)",
                                  ("peer",), registry=reg,
                                  buckets=LATENCY_BUCKETS).labels(node)
        self._writes = Histogram("jm_raft_write_seconds", "A Raft write of this peer: from "
                                 "its submission until applied here, by command (a batch "
                                 "of submissions is one SubmitJobs) and this peer's role "
                                 "(a follower's goes through the leader)",
                                 ("peer", "command", "role"), registry=reg,
                                 buckets=LATENCY_BUCKETS)
        self._rest_children: dict[tuple, Any] = {}  # labels -> the series (_series)
        self._write_children: dict[tuple, Any] = {}
        if read_gauges is not None:
            self.add_gauges(read_gauges)

    def add_gauges(self, read_gauges: Callable[[], Gauges]) -> None:
        """Scrape-time gauges read from `read_gauges` (the peer's, once it is built)."""
        self.registry.register(_ScrapeGauges(self.node, read_gauges))

    def observe_write(self, command: Any, seconds: float, leader: bool) -> None:
        """(RaftHost.write_observers) A committed Raft write of this peer."""
        _series(self._write_children, self._writes, self.node, type(command).__name__,
                "leader" if leader else "follower").observe(seconds)

    def observe_rest(self, method: str, route: str, code: int, seconds: float) -> None:
        _series(self._rest_children, self._rest, self.node, method, route,
                str(code)).observe(seconds)

    def render(self, accept: Optional[str] = None,
               tenant: Optional[str] = None) -> tuple[bytes, str]:
        """The exposition (body, content type): OpenMetrics if `accept` (the scraper's
        Accept header) asks for it, else the classic text format. `tenant`: a caller who
        sees one tenant only gets that tenant's series of the families labelled by
        tenant (jm_job_*), and every other family whole."""
        encoder, content_type = choose_encoder(accept or "")
        source = self.registry if tenant is None else _OneTenant(self.registry, tenant)
        return encoder(source), content_type


class _OneTenant:
    """A registry's families with the samples of other tenants left out."""

    def __init__(self, registry: CollectorRegistry, tenant: str) -> None:
        self.registry, self.tenant = registry, tenant

    def collect(self) -> Iterable[Metric]:
        for fam in self.registry.collect():
            if any("tenant" in s.labels for s in fam.samples):
                kept = Metric(fam.name, fam.documentation, fam.type, fam.unit)
                kept.samples = [s for s in fam.samples
                                if s.labels.get("tenant") == self.tenant]
                yield kept
            else:
                yield fam
