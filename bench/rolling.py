"""A rolling restart's cost (issue 46): N real peers, streaming jobs on every peer (the
tests' ticker, a stateful stream without Spark writing a batch every 50 ms), then
bin/rolling-restart.sh (each peer drained, stopped, started, undrained; the leader last,
handing leadership over as it stops), --rounds times in a row. Measured:

- leaderless: the stopping leader's hand-over, from its log ("Raft leadership handed over
  to ... in S s": from the moment it holds its log until another member leads);
- downtime of every move: in the job's sink, the time from the last batch of one attempt
  to the first batch of the next (drains move jobs away, rebalancing brings them back);
- lease age: the oldest any peer's lease got before a renewal (jm_lease_age_max_seconds,
  read from each peer before it restarts and at the end; a peer fences at the lease
  timeout, 2 s);
- restarts (must be 0) and peers that fenced (their logs' "no heartbeat acknowledged").

    .venv/bin/python bench/rolling.py --peers 3
    .venv/bin/python bench/rolling.py --peers 9 --out bench/results/issue-46-rolling-9.json
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.common import (ROOT, BenchCluster, get, median, pct, post,  # noqa: E402
                          report, wait_until)

FIX = os.path.join(ROOT, "tests", "integration") + "/"
HANDED = re.compile(r"Raft leadership handed over to \S+ in ([0-9.]+) s")
FENCED = "no heartbeat acknowledged"


def lease_ages(urls: list[str]) -> list[float]:
    """jm_lease_age_max_seconds of every peer that answers."""
    ages = []
    for url in urls:
        try:
            with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
                text = r.read().decode()
        except OSError:
            continue
        ages += [float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines()
                 if ln.startswith("jm_lease_age_max_seconds")]
    return ages


def moves(out: str) -> list[float]:
    """The downtime (s) of each change of attempt in a ticker's sink."""
    rows = []
    for name in os.listdir(out):
        if name.isdigit():
            path = os.path.join(out, name)
            with open(path) as f:
                rows.append((int(name), int(f.read().split()[1]), os.stat(path).st_mtime))
    rows.sort()
    return [b[2] - a[2] for a, b in zip(rows, rows[1:]) if a[1] != b[1]]


class AgeWatch:
    """The peers' jm_lease_age_max_seconds, read often: a restarted peer's gauge starts
    again at 0, so `worst` keeps the highest seen over the run."""

    def __init__(self, urls: list[str]) -> None:
        self.urls, self.worst = urls, 0.0

    def read(self) -> None:
        self.worst = max([self.worst, *lease_ages(self.urls)])


def one_round(c: BenchCluster, watch: AgeWatch, deadline: str) -> None:
    proc = subprocess.Popen([os.path.join(ROOT, "bin", "rolling-restart.sh"), "--deadline",
                             deadline], env=c.env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        while proc.poll() is None:
            watch.read()  # before each peer restarts (its gauge would start again)
            time.sleep(0.2)  # sampling period of the gauges
        out = proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        raise RuntimeError(f"rolling-restart.sh exited {proc.returncode}: {out[-2000:]}")


def run(peers: int, per_peer: int, rounds: int) -> dict:
    base = tempfile.mkdtemp(prefix="jm-bench-rolling-")
    try:
        return _run(base, peers, per_peer, rounds)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run(base: str, peers: int, per_peer: int, rounds: int) -> dict:
    settings = {"jobmanager.log.level": "INFO", "jobmanager.slots": 2 * per_peer + 2,
                "restart-strategy.type": "none", "spark.connect.embedded": False,
                "jobmanager.executor.preload": "none", "rebalance.strategy": "on-join"}
    with BenchCluster(peers, settings, base=base) as c:
        outs = {}
        for k in range(peers * per_peer):
            out = os.path.join(base, f"ticks{k}")
            jid = post(c.urls[k % peers] + "/jobs", {
                "entry": "jobs_fixture:ticker", "pyfiles": [FIX], "job-type": "streaming",
                "args": {"output": out, "interval": 0.05}})["jobid"]
            outs[jid] = out
        wait_until(lambda: all(get(c.urls[0] + f"/jobs/{j}")["state"] == "RUNNING"
                               for j in outs), 120, "tickers running")
        watch = AgeWatch(c.urls)
        took = []
        for _ in range(rounds):
            t = time.monotonic()
            one_round(c, watch, "5 s")
            took.append(time.monotonic() - t)
        watch.read()
        jobs = [get(c.urls[0] + f"/jobs/{j}") for j in outs]
        handed, fenced = [], 0
        for path in glob.glob(os.path.join(base, "log", "*.log")):
            with open(path, errors="replace") as f:
                for line in f:
                    m = HANDED.search(line)
                    if m:
                        handed.append(float(m.group(1)))
                    fenced += FENCED in line
        downtime = [d for out in outs.values() for d in moves(out)]
    return {
        "peers": peers, "streaming-jobs": len(outs), "rounds": rounds,
        "round-s": {"median": median(took), "max": max(took)},
        "leaderless-s": {"count": len(handed), "median": median(handed),
                         "max": max(handed, default=float("nan"))},
        "move-downtime-s": {"count": len(downtime), "median": median(downtime),
                            "p90": pct(downtime, 90), "max": max(downtime, default=0.0)},
        "lease-age-max-s": watch.worst,
        "restarts": sum(j["restarts"] for j in jobs),
        "not-running": sum(j["state"] != "RUNNING" for j in jobs),
        "fenced-log-lines": fenced,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--peers", type=int, default=3)
    ap.add_argument("--jobs-per-peer", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out")
    a = ap.parse_args()
    report(run(a.peers, a.jobs_per_peer, a.rounds), a.out)


if __name__ == "__main__":
    main()
