"""Failover benchmark: 3 real peers, 30 probe jobs spread over them; per trial SIGKILL
the peer owning most jobs (alternating: a follower, then the leader), measure the time
from the kill to the last of its jobs RUNNING on another peer (the cluster's own
RUNNING timestamp of the new attempt), and count restarts of every other job (must be
0). The killed peer is started again (bin/jobmanager.sh start) before the next trial,
which comes once the moved jobs have run longer than raft/state.py YOUNG_LOSS: each trial
is one host's loss; peers dying one after the other within seconds of a job's start is
what a job that kills its peers looks like, and counts against its restart strategy.

    .venv/bin/python bench/failover.py                   # default profile, 10 trials
    .venv/bin/python bench/failover.py --profile fast    # the documented fast profile
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.common import ROOT, BenchCluster, get, median, pct, post, wait_until  # noqa: E402
from raft.state import YOUNG_LOSS  # noqa: E402

PROFILES = {
    "default": {},
    # fast failure detection: see docs/benchmarks.md for the trade-off
    "fast": {"heartbeat.interval": "200 ms", "heartbeat.timeout": "1400 ms",
             "jobmanager.lease-timeout": "800 ms", "raft.min-timeout": "150 ms",
             "raft.max-timeout": "400 ms", "raft.append-entries-period": "30 ms",
             "raft.leader-fallback-timeout": "400 ms"},
}


def snapshot(url: str) -> dict:
    return {r["jid"]: r for r in get(url + "/jobs/overview", timeout=10)["jobs"]}


def nodes(url: str) -> dict:
    return {n["id"]: n for n in get(url + "/nodes")["nodes"]}


def kill_peer(urls: list[str], ns: dict, kill_leader: bool, timeout: float) -> dict:
    """SIGKILL the Raft leader, or the live follower holding most jobs, and wait until all
    its jobs are RUNNING on other peers. `ns` is nodes() as read before the kill.
    failover_s = the cluster's RUNNING timestamp of the last moved job minus the kill;
    others_restarted = jobs not on the victim whose attempt or restart count changed."""
    leader = next(n for n, v in ns.items() if v["leader"])
    if kill_leader:
        victim = leader
    else:
        followers = [n for n, v in ns.items() if v["state"] == "ALIVE" and n != leader]
        victim = max(followers, key=lambda n: len(ns[n]["jobs"]))
    v = ns[victim]
    victim_jobs = set(v["jobs"])
    survivor = next(u for u in urls if not u.endswith(f":{v['rest-port']}"))
    before = snapshot(survivor)
    t_kill = time.time()
    os.kill(v["pid"], signal.SIGKILL)

    def moved():
        snap = snapshot(survivor)
        done = all(snap[j]["state"] == "RUNNING" and snap[j]["node"] != victim
                   and snap[j]["attempt"] > before[j]["attempt"] for j in victim_jobs)
        return snap if done else None

    snap = wait_until(moved, timeout, "the victim's jobs RUNNING elsewhere", interval=0.05)
    running_at = [get(f"{survivor}/jobs/{j}")["timestamps"]["RUNNING"] / 1000
                  for j in victim_jobs]
    others = sum(1 for j, r in snap.items() if j not in victim_jobs
                 and (r["attempt"], r["restarts"]) !=
                 (before[j]["attempt"], before[j]["restarts"]))
    return {"victim": victim, "record": v, "leader": leader, "survivor": survivor,
            "moved": len(victim_jobs), "t_kill": t_kill,
            "failover_s": max(running_at) - t_kill if running_at else 0.0,
            "others_restarted": others}


def trial(c: BenchCluster, kill_leader: bool, timeout: float) -> dict:
    k = kill_peer(c.urls, nodes(c.urls[0]), kill_leader, timeout)
    victim, v = k["victim"], k["record"]
    # bring the victim back (it rejoins from its journal, with no jobs)
    line = f"127.0.0.1:{v['rest-port']}:{v['raft-port']}"
    subprocess.run([os.path.join(ROOT, "bin", "jobmanager.sh"), "start", line], env=c.env,
                   check=True, capture_output=True, timeout=60)
    wait_until(lambda: nodes(k["survivor"])[victim]["state"] == "ALIVE", 60, "victim back")
    settled = k["t_kill"] + k["failover_s"] + YOUNG_LOSS + 1.0  # a host's loss, no cascade
    time.sleep(max(0.0, settled - time.time()))
    return {"victim": victim, "leader": kill_leader, "jobs": k["moved"],
            "failover_s": k["failover_s"], "others_restarted": k["others_restarted"]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", choices=sorted(PROFILES), default="default")
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--jobs", type=int, default=30)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    settings = {"spark.connect.embedded": False, "jobmanager.slots": 30,
                "jobmanager.executor.preload": "none", "restart-strategy.type": "none",
                **PROFILES[args.profile]}
    results = []
    with BenchCluster(3, settings) as c:
        probe_dir = os.path.join(c.base, "probes")
        for i in range(args.jobs):
            post(c.urls[i % 3] + "/jobs", {"name": f"probe-{i}", "entry": "probe:main",
                                           "pyfiles": [os.path.join(ROOT, "chaos") + "/"],
                                           "args": {"dir": probe_dir}})
        wait_until(lambda: sum(r["state"] == "RUNNING" for r in snapshot(c.urls[0]).values())
                   == args.jobs, 60, "probes running")
        for t in range(args.trials):
            r = trial(c, kill_leader=(t % 2 == 1), timeout=60)
            print(json.dumps(r), flush=True)
            results.append(r)
    f = [r["failover_s"] for r in results]
    summary = {"profile": args.profile, "trials": len(results),
               "failover_p50_s": median(f), "failover_p99_s": pct(f, 99),
               "failover_max_s": max(f),
               "follower_p50_s": median([r["failover_s"] for r in results if not r["leader"]]),
               "leader_p50_s": median([r["failover_s"] for r in results if r["leader"]]),
               "other_jobs_restarted": sum(r["others_restarted"] for r in results)}
    out = args.out or os.path.join(ROOT, "bench", "results", f"failover-{args.profile}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as fh:
        json.dump({"summary": summary, "trials": results, "settings": settings}, fh, indent=1)
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
