"""The cost of the StreamingQueryListener per micro-batch (issue 31): one real peer with its
embedded Spark Connect server runs the same Structured Streaming query (rate source,
`--rate` rows/s, a count per key: stateful, into the noop sink, a 1 s trigger) as a
`streaming` job, whose job process adds the listener (its progress committed every
jobmanager.streaming.progress-interval), and as a `batch` job, which adds none. The job
returns its micro-batches' durations as Spark measured them (triggerExecution, the first
two left out); the modes alternate (interleaved, the order swapped every round); medians
per run, then the median over the runs; two
warm-up runs (one of each) first: a fresh Connect server's first queries run slower.

    .venv/bin/python bench/listener.py [--rounds 4] [--batches 20] [--rate 1000] [--out FILE]
    .venv/bin/python bench/listener.py --callback-only [--out FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.common import ROOT, BenchCluster, get, median, post, wait_until  # noqa: E402
from jm.policy.jobs.vocab import TERMINAL  # noqa: E402

FIX = os.path.join(ROOT, "tests", "integration") + "/"
SETTINGS = {"spark.conf.spark.sql.shuffle.partitions": 2, "jobmanager.slots": 2,
            "jobmanager.streaming.progress-interval": "5 s"}


def run(url: str, listener: bool, batches: int, rate: int) -> dict:
    """One job to its end: its micro-batch durations (ms) and what the peer recorded."""
    b = post(url + "/jobs", {"entry": "progress_jobs:batch_durations", "pyfiles": [FIX],
                             "job-type": "streaming" if listener else "batch",
                             "restart-strategy": {"type": "none"},
                             "args": {"batches": batches, "rate": rate}})
    jid = b["jobid"]
    wait_until(lambda: get(f"{url}/jobs/{jid}")["state"] in TERMINAL,
               10 * batches + 240, f"job {jid} ended")
    job = get(f"{url}/jobs/{jid}")
    assert job["state"] == "FINISHED", job
    res = job["result"]
    queries = (job.get("progress") or {}).get("queries") or []
    assert bool(queries) == listener, job.get("progress")  # the listener ran, or did not
    return {"median_ms": res["median"], "mean_ms": round(sum(res["durations"]) /
                                                         len(res["durations"]), 1),
            "batches": len(res["durations"]), "reported": bool(queries)}


def callback_cost(n: int = 20000) -> float:
    """µs per call of what the listener does per micro-batch in the job process (a
    progress's fields into the kept progress: jm/runtime/progress.py), on a progress
    shaped like pyspark's (two stateful operators)."""
    import tempfile
    import time
    from types import SimpleNamespace
    from jm.runtime.progress import ProgressKeeper, raw_progress
    ops = [SimpleNamespace(numRowsTotal=10), SimpleNamespace(numRowsTotal=5)]
    with tempfile.TemporaryDirectory() as d:
        keeper = ProgressKeeper(os.path.join(d, "progress.json"))
        t0 = time.perf_counter()
        for i in range(n):
            keeper.note(raw_progress(SimpleNamespace(
                name="bench", id="x", batchId=i, numInputRows=1000, inputRowsPerSecond=1e3,
                processedRowsPerSecond=4e3, batchDuration=250, stateOperators=ops)))
        return round((time.perf_counter() - t0) / n * 1e6, 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--out", default=None)
    ap.add_argument("--callback-only", action="store_true",
                    help="only the listener's own work per batch (no cluster); with --out, "
                         "added to that file's summary")
    a = ap.parse_args()
    if a.callback_only:
        us = median([callback_cost() for _ in range(3)])
        print(json.dumps({"callback_us": us}))
        if a.out:
            with open(a.out) as f:
                doc = json.load(f)
            doc["summary"]["callback_us"] = us
            with open(a.out, "w") as f:
                json.dump(doc, f, indent=1)
        return 0
    runs: dict = {"listener": [], "none": []}
    with BenchCluster(1, SETTINGS) as c:
        url = c.urls[0]
        for listener in (True, False):  # warm-up: the Connect server's JIT, both paths
            run(url, listener, a.batches, a.rate)
        for r in range(a.rounds):
            order = ("listener", "none") if r % 2 == 0 else ("none", "listener")
            for mode in order:
                runs[mode].append(run(url, mode == "listener", a.batches, a.rate))
                print(json.dumps({"round": r, "mode": mode, **runs[mode][-1]}), flush=True)
    summary = {m: {"median_ms": median([x["median_ms"] for x in rs]),
                   "mean_ms": median([x["mean_ms"] for x in rs])} for m, rs in runs.items()}
    summary["cost_ms_per_batch"] = round(summary["listener"]["median_ms"]
                                         - summary["none"]["median_ms"], 1)
    pairs = [x["median_ms"] - y["median_ms"] for x, y in zip(runs["listener"], runs["none"])]
    summary["paired_differences_ms"] = pairs  # listener - none, round by round
    summary["callback_us"] = median([callback_cost() for _ in range(3)])
    print(json.dumps(summary, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"rounds": a.rounds, "batches": a.batches, "rate": a.rate,
                       "cpus": os.cpu_count(), "summary": summary, "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
