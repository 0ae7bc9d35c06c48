"""What the tools of issue 17 cost (medians over --runs):

* the light client: the `jm-client` wheel's size, what it installs into a fresh virtualenv,
  and `jm --help`'s cold start, against the full install (.venv: pyspark and the server's
  dependencies; pyspark's own size is reported);
* `/metrics` (prometheus-client, OpenMetrics) on a 3-peer cluster holding --jobs ended
  jobs: scrape time p50/p99 and size on the leader (cluster-wide series) and a follower;
* Flink's and Livy's list routes on the same cluster: `GET /v1/jobs/overview`, `GET
  /batches`;
* a remote application: submitting a script job whose `script` is an s3:// object (a
  moto S3 server on loopback; copied by the peer into an artifact) against one already an
  artifact, p50 of the accepted answer.

    .venv/bin/python bench/tools.py --runs 3 --out bench/results/tools.json
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, BenchCluster, median, pct, request  # noqa: E402
from jm.policy.jobs.vocab import TERMINAL  # noqa: E402


def _du(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            p = os.path.join(root, f)
            if not os.path.islink(p):
                total += os.path.getsize(p)
    return total


def _cold_start(jm: str, n: int = 5) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run([jm, "--help"], capture_output=True, check=True, cwd="/")
        times.append((time.perf_counter() - t0) * 1000)
    return median(times)


def light_client(tmp: str) -> dict:
    out = subprocess.run([os.path.join(ROOT, "bin", "build-client.sh"),
                          os.path.join(tmp, "dist")], capture_output=True, text=True,
                         check=True)
    wheel = out.stdout.strip()
    venv = os.path.join(tmp, "venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    before = _du(venv)
    subprocess.run([sys.executable, "-m", "pip", "--python", os.path.join(venv, "bin", "python"),
                    "install", "-q", "--no-index", "--no-deps", wheel], check=True)
    pyspark = subprocess.run([os.path.join(ROOT, ".venv", "bin", "python"), "-c",
                              "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    return {"wheel-kb": round(os.path.getsize(wheel) / 1024, 1),
            "installed-kb": round((_du(venv) - before) / 1024, 1),
            "pyspark-mb": round(_du(pyspark) / 2**20, 1),  # what the full install needs
            "help-ms-light": round(_cold_start(os.path.join(venv, "bin", "jm")), 1),
            "help-ms-full": round(_cold_start(os.path.join(ROOT, ".venv", "bin", "jm")), 1)}


def _timed_get(url: str, n: int) -> tuple[list[float], int]:
    times, size = [], 0
    for _ in range(n):
        t0 = time.perf_counter()
        with urllib.request.urlopen(url, timeout=10) as resp:
            size = len(resp.read())
        times.append((time.perf_counter() - t0) * 1000)
    return times, size


def _summary(times: list[float], size: int | None = None) -> dict:
    out = {"p50-ms": round(median(times), 2), "p99-ms": round(pct(times, 99), 2)}
    if size is not None:
        out["kb"] = round(size / 1024, 1)
    return out


def _wait_ended(url: str, ids: list[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    pending = set(ids)
    while pending:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(pending)} jobs did not end")
        rows = request("GET", url + "/jobs/overview")["jobs"]
        pending -= {r["jid"] for r in rows if r["state"] in TERMINAL}
        time.sleep(0.2)  # poll interval


def cluster_routes(tmp: str, jobs: int, scrapes: int) -> dict:
    from tests.s3server import BUCKET, peer_settings, s3_server
    app = os.path.join(tmp, "noop.py")
    with open(app, "w") as f:
        f.write("print('ok')\n")
    with s3_server(os.path.join(tmp, "moto.log")) as (endpoint, s3):
        s3.put_object(Bucket=BUCKET, Key="apps/noop.py", Body=b"print('ok')\n")
        settings = {"spark.connect.embedded": False, "restart-strategy.type": "none",
                    "jobstore.expiration-time": "1 h", **peer_settings(endpoint)}
        with BenchCluster(3, settings, base=os.path.join(tmp, "c")) as c:
            url = c.urls[0]
            spec = {"script": app, "spark-mode": "connect"}  # no Spark: no driver JVM
            ids = [request("POST", c.urls[i % 3] + "/jobs", spec)["jobid"] for i in range(jobs)]
            _wait_ended(url, ids)
            # the leader alone exports the cluster-wide series
            lead = next(u for u in c.urls if b"jm_cluster_" in urllib.request.urlopen(
                u + "/metrics", timeout=10).read())
            follower = next(u for u in c.urls if u != lead)
            out: dict = {"jobs": jobs}
            out["metrics-leader"] = _summary(*_timed_get(lead + "/metrics", scrapes))
            out["metrics-follower"] = _summary(*_timed_get(follower + "/metrics", scrapes))
            out["flink-overview"] = _summary(*_timed_get(follower + "/v1/jobs/overview",
                                                         scrapes))
            out["livy-batches"] = _summary(*_timed_get(follower + "/batches?size=1000",
                                                       scrapes))
            art = None
            local, remote = [], []
            for i in range(20):
                t0 = time.perf_counter()
                b = request("POST", follower + "/jobs",
                            {**spec, "script": f"s3://{BUCKET}/apps/noop.py"})
                remote.append((time.perf_counter() - t0) * 1000)
                if art is None:
                    art = request("GET", follower + f"/jobs/{b['jobid']}")["spec"]["script"]
                t0 = time.perf_counter()
                request("POST", follower + "/jobs", {**spec, "script": art})
                local.append((time.perf_counter() - t0) * 1000)
            out["submit-artifact"] = _summary(local)
            out["submit-s3-script"] = _summary(remote)
            return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=300, help="ended jobs the cluster holds")
    ap.add_argument("--scrapes", type=int, default=50)
    ap.add_argument("--out", help="write the runs and their medians here (JSON)")
    a = ap.parse_args()
    runs = []
    for i in range(a.runs):
        tmp = tempfile.mkdtemp(prefix="jm-bench-tools-")
        try:
            run = {"client": light_client(tmp), **cluster_routes(tmp, a.jobs, a.scrapes)}
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(json.dumps(run), flush=True)
        runs.append(run)

    def med(path: tuple) -> float:
        vals = []
        for r in runs:
            v = r
            for k in path:
                v = v[k]
            vals.append(v)
        return round(median(vals), 2)
    keys = [("client", k) for k in runs[0]["client"]] + [
        (section, k) for section in ("metrics-leader", "metrics-follower", "flink-overview",
                                     "livy-batches", "submit-artifact", "submit-s3-script")
        for k in runs[0][section]]
    medians = {"/".join(k): med(k) for k in keys}
    print(json.dumps({"medians": medians}, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"rev": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                             capture_output=True, text=True).stdout.strip(),
                       "args": vars(a), "runs": runs, "medians": medians}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
