"""Soak: the default failure-detection profile under a busy Spark workload must see no
false failover. 3 real peers, each with its own Spark Connect server; 30 jobs that run
Spark queries in a loop for --minutes; afterwards no peer may have been declared dead
and no job may have moved or restarted.

    .venv/bin/python bench/soak.py                # 10 minutes
    .venv/bin/python bench/soak.py --minutes 2    # a quick look
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.common import ROOT, BenchCluster, get, post, wait_until  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--jobs", type=int, default=30)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "soak.json"))
    args = ap.parse_args()
    settings = {"spark.connect.embedded": True, "spark.master": "local[2]",
                "spark.driver.memory": "768m", "jobmanager.slots": 12,
                "spark.conf.spark.sql.shuffle.partitions": 4,
                "restart-strategy.type": "fixed-delay"}
    with BenchCluster(3, settings) as c:
        wait_until(lambda: all(get(u + "/healthz").get("spark-ready") for u in c.urls), 300,
                   "Spark Connect servers ready", interval=1)
        seconds = args.minutes * 60
        ids = [post(c.urls[i % 3] + "/jobs",
                    {"name": f"soak-{i}", "entry": "spark_load:main",
                     "pyfiles": [os.path.join(ROOT, "bench") + "/"],
                     "args": {"seconds": seconds}})["jobid"] for i in range(args.jobs)]
        wait_until(lambda: sum(r["state"] == "RUNNING" for r in
                               get(c.urls[0] + "/jobs/overview")["jobs"]) == args.jobs,
                   120, "soak jobs running")
        start = {r["jid"]: (r["attempt"], r["node"]) for r in
                 get(c.urls[0] + "/jobs/overview")["jobs"]}
        t0, samples, leaders = time.time(), 0, set()
        while time.time() - t0 < seconds:
            ov = get(c.urls[samples % 3] + "/overview", timeout=30)
            leaders.add(ov["leader"])
            samples += 1
            time.sleep(5)  # sampling period of the observation
        rows = {r["jid"]: r for r in get(c.urls[0] + "/jobs/overview", timeout=30)["jobs"]}
        nodes = get(c.urls[0] + "/nodes", timeout=30)["nodes"]
        moved = [j for j in ids if (rows[j]["attempt"], rows[j]["node"]) != start[j]]
        restarted = [j for j in ids if rows[j]["restarts"] > 0]
        failed = [j for j in ids if rows[j]["state"] == "FAILED"]
        dead = [n["id"] for n in nodes if n["state"] == "DEAD" or n["declared-dead-at"] > 0]
        queries = 0
        for j in ids:
            res = get(f"{c.urls[0]}/jobs/{j}", timeout=30).get("result")
            queries += res if isinstance(res, int) else 0
    out = {"minutes": args.minutes, "jobs": args.jobs, "peers_declared_dead": dead,
           "jobs_moved": moved, "jobs_restarted": restarted, "jobs_failed": failed,
           "leaders_seen": sorted(x for x in leaders if x), "false_failovers": len(dead) + len(moved),
           "spark_queries_total": queries, "time": time.strftime("%Y-%m-%d %H:%M:%S")}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out, indent=1))
    return 0 if out["false_failovers"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
