"""What an engine's start adds to a job's start (issue 40): on one real peer at
`spark.connect.share-level: tenant`, each of T tenants submits a small connect-mode job
(a Spark query of one row) to an engine that is not running yet (cold: its JVM starts
with the job), then another one (warm: the engine is reused); the same jobs at
`share-level: peer` (the peer's engine, started with the peer) are the baseline.
Submit-to-FINISHED times, medians over the tenants.

    .venv/bin/python bench/engine_start.py                  # 5 tenants
    .venv/bin/python bench/engine_start.py --tenants 3 --out /tmp/e.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.common import ROOT, BenchCluster, median, wait_until  # noqa: E402
from bench.density import BENCH, call  # noqa: E402
from jm.policy.jobs.vocab import TERMINAL  # noqa: E402

TOKEN = "density-root"


def run_job(url: str, token: str) -> float:
    """Seconds from submission to FINISHED of one small connect-mode job."""
    t0 = time.monotonic()
    s, b = call("POST", url + "/jobs", {"entry": "density_job:one_row", "pyfiles": [BENCH],
                                        "spark-mode": "connect",
                                        "restart-strategy": {"type": "none"}}, token)
    assert s == 202, b
    jid = b["jobid"]

    def ended():
        s, j = call("GET", url + f"/jobs/{jid}", token=token)
        return j if j.get("state") in TERMINAL else None
    job = wait_until(ended, 300, f"job {jid} ended")
    assert job["state"] == "FINISHED", job
    return time.monotonic() - t0


def run_level(level: str, tenants: int, memory: str) -> dict:
    settings = {"rest.auth.token": TOKEN, "spark.connect.share-level": level,
                "spark.master": "local[1]", "spark.driver.memory": memory,
                "spark.connect.engine.max-per-peer": tenants + 2}
    with BenchCluster(1, settings) as c:
        url = c.urls[0]
        if level == "peer":
            wait_until(lambda: call("GET", url + "/healthz")[1].get("spark-ready"), 300,
                       "the peer's engine ready")
        cold, warm = [], []
        for t in range(tenants):
            s, b = call("POST", url + "/tokens", {"name": f"t{t}", "role": "submit",
                                                  "tenant": f"t{t}"})
            assert s == 201, b
            cold.append(run_job(url, b["token"]))
            warm.append(run_job(url, b["token"]))
        return {"share-level": level, "tenants": tenants,
                "first_job_s": [round(x, 2) for x in cold],
                "second_job_s": [round(x, 2) for x in warm],
                "first_job_median_s": round(median(cold), 2),
                "second_job_median_s": round(median(warm), 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tenants", type=int, default=5)
    ap.add_argument("--engine-memory", default="1g")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results",
                                                  "issue-40-engine-start.json"))
    args = ap.parse_args()
    runs = []
    for level in ("tenant", "peer"):
        r = run_level(level, args.tenants, args.engine_memory)
        print(json.dumps(r), flush=True)
        runs.append(r)
    with open(args.out, "w") as f:
        json.dump({"args": vars(args), "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
