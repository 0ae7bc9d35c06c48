"""What a JobMaster needs from its peer (JobEnv: a small set of services, no peer
internals), and the status reports' order and batching."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional

from jm.cluster.batcher import Batcher
from raft.commands import ReportStatuses


_last_seq = 0


def next_report_seq() -> int:
    """StatusReport.seq: strictly increasing within this process (a wall clock step back
    does not lower it: it only counts on from the last value). It starts from the wall
    clock in microseconds only for readability; no order across processes rests on it:
    the state machine compares seqs within one epoch, and a restarted peer (a new pid)
    has its jobs assigned again with a new epoch, whose seqs start afresh."""
    global _last_seq
    _last_seq = max(_last_seq + 1, time.time_ns() // 1000)
    return _last_seq


# seconds a busy reporter waits for more reports before its next command (at rest a report
# goes at once): with jobs ending at ~100/s a peer's reports travelled ~1.9 to a command,
# each applied, notified and reconciled on every peer (docs/benchmarks.md, issue 45)
REPORT_GATHER = 0.02


def make_reporter(raft, timeout: float) -> Batcher:
    """Batches the status reports of all JobMasters of a peer into one Raft command."""
    return Batcher(raft, ReportStatuses, timeout, retry=True, gather=REPORT_GATHER)


@dataclass
class JobEnv:
    """What a JobMaster needs from its peer (a small gateway, no peer internals)."""
    node: str
    conf: Any
    executor: Any  # spawn(RunParams) -> a process, kill(process, signal): SqlJobExecutor
    reporter: Batcher
    resolve_pyfiles: Callable  # async (list[str]) -> list[str] local paths
    spark_remote: Callable[[], Optional[str]]
    spark_ready_file: Optional[str]
    log_dir: str
    work_dir: str
    # wall clock: only stamps what is shown to people (report and savepoint times); no
    # decision compares it, on this host or with another host's stamps
    clock: Callable[[], float]
    wait_lease: Callable[[], Awaitable[None]] = lambda: _nothing()  # returns with the lease
    commit: Optional[Callable[[Any], Awaitable[Any]]] = None  # one Raft command -> Result
    metrics: Any = None  # jm.cluster.metrics.PeerMetrics
    spark_conf_dir: Optional[str] = None  # SPARK_CONF_DIR for jobs' drivers
    # the peer's Connect server application on a Spark cluster (id, UI, executors, a
    # waiting note), None otherwise
    spark_info: Callable[[], Optional[dict]] = lambda: None
    # monotonic clock of this host: restart delays and failure-rate windows are measured
    # on it, so a wall clock step (NTP, an operator) neither shortens nor stretches them
    monotonic: Callable[[], float] = time.monotonic
    # the peer's engines (jm/cluster/spark/engines.py): a connect-mode job acquires the one of
    # its share level; None: every job uses spark_remote()
    engines: Any = None
    # the peer's Python environments (jm/cluster/jobs/envs.py EnvCache): a job with
    # `requirements` runs with the one of its set
    envs: Any = None


async def _nothing() -> None:
    return None
