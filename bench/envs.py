"""What a job's own requirements cost (issue 42): on one real peer, submit-to-FINISHED of
a job that returns at once, without requirements (the baseline), with a set whose
environment is cached (target <= 1.2x the baseline), and with a cached set that replaces
a module the zygote imported (six: the job runs in a fresh interpreter of its
environment); the first build of each set (pip's resolution, download and install: the
job's time minus the baseline), and the disk the cache takes. Medians over --runs.

    .venv/bin/python bench/envs.py                   # 10 runs of each
    .venv/bin/python bench/envs.py --runs 5 --out /tmp/envs.json
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.common import BenchCluster, median, report, wait_until  # noqa: E402
from bench.density import call  # noqa: E402
from jm.cluster.jobs.envs import dir_size  # noqa: E402
from jm.policy.jobs.vocab import TERMINAL  # noqa: E402

TOKEN = "envs-root"
BENCH = os.path.dirname(os.path.abspath(__file__)) + "/"
SETS = {"cached": ["tabulate==0.9.0"], "fresh-interpreter": ["six==1.16.0"]}


def run_job(url: str, requirements: list[str] | None) -> float:
    """Seconds from submission to FINISHED of a job that returns at once."""
    spec = {"entry": "trivial_job:main", "pyfiles": [BENCH],
            "restart-strategy": {"type": "none"}}
    if requirements:
        spec["requirements"] = requirements
    t0 = time.monotonic()
    s, b = call("POST", url + "/jobs", spec, TOKEN)
    assert s == 202, b
    jid = b["jobid"]

    def ended():
        s, j = call("GET", url + f"/jobs/{jid}", token=TOKEN)
        return j if j.get("state") in TERMINAL else None
    job = wait_until(ended, 900, f"job {jid} ended", interval=0.02)
    if job["state"] != "FINISHED":
        raise SystemExit(f"job {jid} {job['state']}: "
                         f"{call('GET', url + f'/jobs/{jid}/exceptions', token=TOKEN)[1]}")
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--out")
    a = ap.parse_args()
    base = tempfile.mkdtemp(prefix="jm-bench-")
    try:
        with BenchCluster(1, {"rest.auth.token": TOKEN}, base=base) as c:
            url = c.urls[0]
            run_job(url, None)  # (the zygote's first fork)
            baseline = [run_job(url, None) for _ in range(a.runs)]
            out: dict = {"runs": a.runs, "baseline_s": median(baseline)}
            for name, reqs in SETS.items():
                first = run_job(url, reqs)
                cached = [run_job(url, reqs) for _ in range(a.runs)]
                out[name] = {"requirements": reqs, "first_build_s": first - out["baseline_s"],
                             "cached_s": median(cached),
                             "ratio": median(cached) / out["baseline_s"]}
            data = os.path.join(base, "data")
            out["cache_mb"] = round(sum(dir_size(os.path.join(data, d, "envs"))
                                        for d in os.listdir(data)) / 2 ** 20, 1)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    report(out, a.out)


if __name__ == "__main__":
    main()
