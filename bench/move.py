"""Move benchmark for the streaming example (examples/streaming_events.py) on 3 real peers,
each with its embedded Spark Connect server, while events keep arriving (one file every
0.5 s).

Planned moves run first, then failovers. A move whose target JVM never ran the query
(a fresh JVM: cold JIT, classes not loaded) is flagged `cold_target`.

* planned move: drain the job's peer (a planned move: stop at a micro-batch boundary on
  the old peer, resume from the checkpoint on the new one with a new epoch), then undo the
  drain; downtime = from the drain request to the job RUNNING on the new peer (the
  cluster's RUNNING timestamp), and to the first micro-batch the new attempt commits;
* failover move: SIGKILL the job's peer; from the kill to RUNNING elsewhere, and to the
  first committed micro-batch; the peer is started again before the next trial.

At the end the sink is checked: every window exactly once.

    .venv/bin/python bench/move.py [--trials 10] [--profile default|fast]
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
from bench.common import ROOT, BenchCluster, get, median, pct, request, wait_until  # noqa: E402
from bench.failover import PROFILES, nodes, post  # noqa: E402
from chaos.streaming import EventFeed, wait_sink  # noqa: E402

EXAMPLE = os.path.join(ROOT, "examples", "streaming_events.py")


def commits(checkpoint: str) -> dict[int, float]:
    d = os.path.join(checkpoint, "events", "commits")
    out = {}
    for n in os.listdir(d) if os.path.isdir(d) else []:
        if n.isdigit():
            out[int(n)] = os.path.getmtime(os.path.join(d, n))
    return out


def last_batch(checkpoint: str) -> int:
    """The last committed batch id (Spark keeps only the last 100 commit files)."""
    return max(commits(checkpoint), default=-1)


def job(url: str, jid: str) -> dict:
    return get(f"{url}/jobs/{jid}", timeout=10)


def _after_move(c, jid, t0, old_attempt, checkpoint, timeout) -> dict:
    def running():
        for u in c.urls:
            try:
                j = job(u, jid)
            except OSError:
                continue
            if j["state"] == "RUNNING" and j["attempt"] > old_attempt:
                return j
        return None
    j = wait_until(running, timeout, "the job RUNNING on its new peer", interval=0.05)
    running_at = j["timestamps"]["RUNNING"] / 1000
    start = next(a["start-time"] for a in j["attempts"] if a["attempt"] == j["attempt"]) / 1000

    def first_commit():
        later = [t for t in commits(checkpoint).values() if t >= start]
        return min(later) if later else None
    committed_at = wait_until(first_commit, timeout, "a micro-batch committed after the move",
                              interval=0.1)
    return {"node": j["node"], "attempt": j["attempt"], "running_s": running_at - t0,
            "first_batch_s": committed_at - t0}


def planned(c, jid, checkpoint, timeout) -> dict:
    j = job(c.urls[0], jid)
    owner = j["node"]
    t0 = time.time()
    res = request("POST", f"{c.urls[0]}/nodes/{owner}/drain")
    out = _after_move(c, jid, t0, j["attempt"], checkpoint, timeout)
    request("DELETE", f"{c.urls[0]}/nodes/{owner}/drain")
    assert res["state"] in ("DRAINING", "DRAINED")
    return dict(out, kind="planned", source=owner)


def fencings(c) -> int:
    """Times a peer stopped its jobs because its lease ran out (none should on survivors)."""
    n = 0
    log_dir = os.path.join(c.base, "log")
    for name in os.listdir(log_dir):
        if name.endswith(".log"):
            with open(os.path.join(log_dir, name), errors="replace") as f:
                n += f.read().count("no heartbeat acknowledged")
    return n


def failover(c, jid, checkpoint, timeout) -> dict:
    fenced_before = fencings(c)
    j = job(c.urls[0], jid)
    owner = j["node"]
    ns = nodes(c.urls[0])
    v = ns[owner]
    t0 = time.time()
    os.kill(v["pid"], signal.SIGKILL)
    out = _after_move(c, jid, t0, j["attempt"], checkpoint, timeout)
    out["survivor_fencings"] = fencings(c) - fenced_before
    out["leader_killed"] = v["leader"]
    line = f"127.0.0.1:{v['rest-port']}:{v['raft-port']}"
    subprocess.run([os.path.join(ROOT, "bin", "jobmanager.sh"), "start", line], env=c.env,
                   check=True, capture_output=True, timeout=60)
    url = f"http://127.0.0.1:{v['rest-port']}"
    wait_until(lambda: get(url + "/healthz").get("spark-ready"), 240, "victim's Spark back",
               interval=0.5)
    return dict(out, kind="failover", source=owner)


def sql_rows(c, sql: str) -> list:
    """Run a SQL job on peer 1 and return its rows ([] if it failed)."""
    jid = post(c.urls[1] + "/jobs", {"sql": sql, "name": "check"})["jobid"]
    r = wait_until(lambda: (lambda x: x if x["state"] in ("FINISHED", "FAILED") else None)(
        get(f"{c.urls[1]}/jobs/{jid}/result")), 120, "check query", interval=0.3)
    return r.get("result", {}).get("rows", []) if r["state"] == "FINISHED" else []


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10, help="moves of each kind")
    ap.add_argument("--profile", choices=sorted(PROFILES), default="default")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    settings = {"spark.connect.embedded": True, "spark.master": "local[1]",
                "spark.driver.memory": "512m", "spark.conf.spark.sql.shuffle.partitions": 2,
                "rebalance.strategy": "none", "restart-strategy.type": "fixed-delay",
                "restart-strategy.fixed-delay.attempts": 100, **PROFILES[args.profile]}
    results = []
    with BenchCluster(3, settings) as c:
        wait_until(lambda: all(get(u + "/healthz").get("spark-ready") for u in c.urls), 300,
                   "Spark ready on every peer", interval=0.5)
        src, sink = os.path.join(c.base, "events"), os.path.join(c.base, "agg")
        os.makedirs(src)
        feeder = EventFeed(src)
        feeder.start()
        jid = post(c.urls[0] + "/jobs", {
            "name": "events-per-minute", "entry": "streaming_events:main",
            "pyfiles": [EXAMPLE], "job-type": "streaming",
            "args": {"input": src, "output": sink, "trigger": "500 milliseconds"}})["jobid"]
        checkpoint = os.path.join(c.base, "ha", jid, "checkpoints")
        wait_until(lambda: last_batch(checkpoint) >= 2, 300, "first micro-batches",
                   interval=0.5)
        ran_on = {job(c.urls[0], jid)["node"]}  # JVMs that have run the query (warm)
        try:
            for t in range(2 * args.trials):  # planned moves first, then failovers
                fn = planned if t < args.trials else failover
                r = fn(c, jid, checkpoint, 120)
                r["cold_target"] = r["node"] not in ran_on  # its JVM never ran the query
                ran_on.add(r["node"])
                if fn is failover:  # the killed peer comes back with a fresh JVM
                    ran_on.discard(r["source"])
                print(json.dumps(r), flush=True)
                results.append(r)
                n = last_batch(checkpoint)
                wait_until(lambda: last_batch(checkpoint) >= n + 2, 120, "settled",
                           interval=0.2)
        finally:
            feeder.finish()
        res = wait_sink(lambda sql: sql_rows(c, sql), sink, feeder.events, interval=2)
        sink_check = {"windows": res["windows"], "duplicated": res["duplicated"],
                      "wrong_or_missing": res["missing"] + res["wrong"]}
    summary = {"profile": args.profile, "sink": sink_check}
    for kind in ("planned", "failover"):
        rs = [r for r in results if r["kind"] == kind]
        for m in ("running_s", "first_batch_s"):
            v = [r[m] for r in rs]
            summary[f"{kind}_{m[:-2]}_p50_s"] = median(v)
            summary[f"{kind}_{m[:-2]}_p99_s"] = pct(v, 99)
        warm = [r["first_batch_s"] for r in rs if not r["cold_target"]]
        summary[f"{kind}_first_batch_warm_target_p50_s"] = median(warm)
        summary[f"{kind}_moves"] = len(rs)
        summary[f"{kind}_cold_targets"] = sum(r["cold_target"] for r in rs)
    summary["failover_leader_kills"] = sum(r.get("leader_killed", False) for r in results)
    summary["survivor_fencings"] = sum(r.get("survivor_fencings", 0) for r in results)
    out = args.out or os.path.join(ROOT, "bench", "results", f"move-{args.profile}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as fh:
        json.dump({"summary": summary, "moves": results, "settings": settings}, fh, indent=1)
    print(json.dumps(summary, indent=1))
    return 0 if sink_check["duplicated"] == 0 and sink_check["wrong_or_missing"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
