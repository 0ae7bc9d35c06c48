"""How fast this machine runs the peers' kind of work in the minute a load runs.

This VM's speed moves by half within minutes, at times within seconds (the hypervisor's
other guests share its caches and memory bandwidth; little shows as stolen time), and the
same build's CPU a job moves with it. `speed_probe()` times a fixed piece of the peers'
own work in this process, between loads (never during one): 30-job submission batches
decoded and applied to a fresh replica of the state, pure Python as the peers' work is,
without this process's collector. Taken before and after a load, it says how fast the
machine ran around it: a load between two slow probes ran in a slow stretch. It cannot
say how fast the machine ran during the load.

    .venv/bin/python bench/probe.py      # the probe now, five times
"""
from __future__ import annotations

import gc
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.submit import JOB  # noqa: E402
from jm.policy.jobs.spec import validate_spec  # noqa: E402
from raft import protocol  # noqa: E402
from raft.commands import SubmitJob, SubmitJobs, decode, encode  # noqa: E402
from raft.state import ClusterState  # noqa: E402

BATCH = 30  # jobs a batch (as the benchmarks' 64 clients make them)
BATCHES = 20  # batches a round (600 jobs, ~10 ms here)
# a held benchmark job's spec as the peers replicate it (bench/submit.py's JOB, accepted)
SPEC = validate_spec(dict(JOB))


def _round(blobs: list[bytes]) -> float:
    state = ClusterState()
    state.protocol = protocol.PROTOCOL
    start = time.perf_counter()
    for blob in blobs:
        state.apply(decode(blob))
    return time.perf_counter() - start


def speed_probe(seconds: float = 0.3) -> float:
    """Microseconds a job of the probe's work: the median of the rounds run in about
    `seconds` (at least five)."""
    blobs = [encode(SubmitJobs(tuple(
        SubmitJob(f"{b}-{i}", dict(SPEC, jobid=f"{b}-{i}"), 1.0, f"r-{b}-{i}")
        for i in range(BATCH)))) for b in range(BATCHES)]
    times: list[float] = []
    end = time.monotonic() + seconds
    collecting = gc.isenabled()
    gc.disable()  # (the work alone: not this process's heap, which a load leaves large)
    try:
        while len(times) < 5 or time.monotonic() < end:
            times.append(_round(blobs))
    finally:
        if collecting:
            gc.enable()
    return round(1e6 * statistics.median(times) / (BATCH * BATCHES), 2)


if __name__ == "__main__":
    print([speed_probe() for _ in range(5)])
