"""Two builds, or two settings, of the accept path side by side: held submissions (every
slot held by a sleeping job first, so that none runs) from C closed-loop clients to 3
real peers (fsync on), A and B in turn on fresh clusters, pair after pair, so that the
machine's drift (this VM's speed moves by half within minutes) falls on both alike.

    .venv/bin/python bench/submit_ab.py --b-root /tmp/other-checkout   # this tree against another
    .venv/bin/python bench/submit_ab.py -D cluster.protocol-version=7   # B: this tree, a setting
    .venv/bin/python bench/submit_ab.py --pairs 5 --loads 2 --jobs 8000 --clients 64 \\
                                        --out bench/results/submit-ab.json

(--b-root: the other checkout, whose bin/ starts B's peers with its own code; -D key=value
(repeatable): B's settings over A's; --a-root likewise for A, this tree by default. The
clients are this tree's, for both.)

Reported per load: accepted/s, p50 ms, the peers' CPU ms a job, the machine's speed
just before and after it (`probe_us`, bench/probe.py), idle cores, jobs a Raft entry
(`jm_raft_write_seconds`); per side the medians over its loads, and the pairs in B's
favour (a pair: A's and B's loads in turn, their medians compared).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import (ROOT, BenchCluster, cpu_ticks, get, machine_cores,  # noqa: E402
                          median, report, wait_until)
from bench.probe import speed_probe  # noqa: E402
from bench.profile_submit import hold_every_slot  # noqa: E402
from bench.submit import (closed_loop, cpu_seconds, run_load,  # noqa: E402
                          submission_writes, write_latency)
from jm.config import ConfigError, parse_overrides  # noqa: E402


def side_loads(root: str, settings: dict, loads: int, jobs: int, clients: int) -> list[dict]:
    """`loads` loads of `jobs` held submissions on one fresh cluster of `root`'s build."""
    out = []
    with BenchCluster(3, {"spark.connect.embedded": False, "jobmanager.slots": 64,
                          **settings}, root=root) as c:
        wait_until(lambda: get(c.urls[0] + "/overview")["peers-alive"] == 3, 30, "3 peers")
        hold_every_slot(c)
        pids = c.pids()
        for _ in range(loads):
            probe = speed_probe()  # (the machine's speed just before the load, and after)
            cpu0, ticks, w0 = cpu_seconds(pids)["peers"], cpu_ticks(), submission_writes(c.urls)
            sat = run_load(closed_loop(c.urls, jobs, clients))
            cpu1, w1 = cpu_seconds(pids)["peers"], submission_writes(c.urls)
            n = max(1, sat["accepted"])
            out.append({"accepted_per_s": round(sat["rate"]), "p50_ms": round(sat["p50_ms"], 1),
                        "cpu_ms_per_job": round(1000 * (cpu1 - cpu0) / n, 3),
                        "probe_us": [probe, speed_probe()],
                        "idle_cores": machine_cores(ticks, cpu_ticks(), sat["elapsed"])["idle"],
                        "jobs_per_batch": write_latency(w0, w1, n)["jobs_per_batch"]})
    return out


def summary(loads: list[dict]) -> dict:
    return {k: median([r[k] for r in loads if r[k] is not None])
            for k in ("accepted_per_s", "p50_ms", "cpu_ms_per_job", "idle_cores",
                      "jobs_per_batch")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a-root", default=ROOT)
    ap.add_argument("--b-root", default=None)
    ap.add_argument("-D", dest="settings", action="append", default=[],
                    help="a setting of B's (key=value, as a peer's -D)")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--loads", type=int, default=2, help="loads a cluster")
    ap.add_argument("--jobs", type=int, default=8000, help="jobs a load")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    try:
        b_settings = parse_overrides(a.settings)
    except ConfigError as exc:
        ap.error(str(exc))
    b_root = os.path.abspath(a.b_root or a.a_root)
    if b_root == os.path.abspath(a.a_root) and not a.settings:
        ap.error("B is A: give --b-root or a -D setting")
    sides = {"A": (os.path.abspath(a.a_root), {}), "B": (b_root, b_settings)}
    out: dict = {"sides": {k: {"root": r, "settings": s} for k, (r, s) in sides.items()},
                 "clients": a.clients, "jobs": a.jobs, "pairs": []}
    for i in range(a.pairs):
        pair = {}
        for name, (root, settings) in sides.items():
            pair[name] = side_loads(root, settings, a.loads, a.jobs, a.clients)
            print(f"pair {i + 1} {name} {time.strftime('%H:%M:%S')}: "
                  + "; ".join(f"{r['accepted_per_s']}/s cpu {r['cpu_ms_per_job']} "
                              f"probe {r['probe_us']}" for r in pair[name]),
                  file=sys.stderr, flush=True)
        out["pairs"].append(pair)
    for name in sides:
        out[name] = summary([r for p in out["pairs"] for r in p[name]])
    out["pairs_b_ahead"] = sum(
        median([r["accepted_per_s"] for r in p["B"]]) >
        median([r["accepted_per_s"] for r in p["A"]]) for p in out["pairs"])
    report(out, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
