"""Side-by-side benchmark: our peer-to-peer JobManager cluster against Apache Flink 2.3's
standby-JobManager HA (ZooKeeper), in one invocation, on 127.0.0.1 only (issue 6).

    .venv/bin/python bench/vs_flink.py                 # set-up + full run (~20 min on 2 cores)
    .venv/bin/python bench/vs_flink.py --quick         # smoke run: 1 trial, 4 jobs, few submissions
    .venv/bin/python bench/vs_flink.py --skip-setup    # reuse bench/.flink (no download/compile)
    .venv/bin/python bench/vs_flink.py --trials 5 --ours-trials 20  # more trials

Set-up (skipped with --skip-setup; every step is also skipped when its output exists):
  * `pip download --no-deps apache-flink==2.3.0 apache-flink-libraries==2.3.0` into
    bench/.flink/wheels, both wheels unzipped into bench/.flink/home: pyflink/bin,
    pyflink/lib and pyflink/conf form a Flink home (bench/.flink/ is git-ignored; no Flink
    code is committed);
  * bench/flink_job/BenchJob.java compiled with javac against <home>/lib/* and packaged
    with jar into bench/.flink/job/bench-job.jar: `stream` is a throttled unbounded source
    (4 records/s) into a discarding sink with checkpoints every 5 s, `batch` a job that
    finishes at once.

Systems (one after the other):
  * Flink: ZooKeeper (FlinkZooKeeperQuorumPeer from flink-dist, standalone, on a free
    loopback port), 2 JobManagers (leader + standby, each with its own conf dir, RPC and
    REST port), 1 TaskManager with 16 slots, HA storage and checkpoints under
    bench/.flink/run/. Profiles: "default" (Flink's default timeouts: heartbeat 10 s / 50 s,
    ZooKeeper session 60 s; zoo.cfg allows sessions up to 60 s so that the client's default
    is what is used) and "tuned" (heartbeat.interval 1 s, heartbeat.timeout 5 s,
    high-availability.zookeeper.client.session-timeout 6 s, connection-timeout 3 s).
    Every process runs in the foreground under this script (jobmanager.sh / taskmanager.sh
    start-foreground exec the JVM, so the child's PID is the JVM's).
  * ours: 3 peers with bench.common.BenchCluster (spark.connect.embedded false,
    jobmanager.executor.preload none, restart-strategy none, as bench/failover.py), profiles
    "default" and "fast" (bench.failover.PROFILES). The long-running job is the probe job
    (chaos/probe.py), the trivial job bench/trivial_job.py. A fresh cluster per trial, so
    every trial starts from K jobs spread over the 3 peers.

Measurements:
  1. kill -9 of the leader with K streaming jobs (K = 4, 12): time from the kill until every
     job RUNNING again (Flink: every job RUNNING with all its tasks running in the
     surviving JobManager's /jobs/overview, polled every 0.1 s; ours: the cluster's RUNNING
     timestamps of the moved jobs), and jobs restarted (Flink: jobs whose tasks started
     after the kill; ours: the leader's jobs moved, plus restarts of every other job, which
     must be 0).
  2. kill -9 of a non-leader process holding jobs: Flink's standby JobManager (nothing
     moves: the jobs must stay RUNNING through an observation window), our follower peer
     with most jobs (its jobs move).
  3. REST submission of trivial jobs, 1 and 8 closed-loop clients: submits/s, completed
     jobs/s (first submission -> last job ended), p50/p99 submit latency. Flink: the jar is
     uploaded once to each JobManager (POST /jars/upload), then POST /jars/<id>/run per job,
     clients alternating between both JobManagers; ours: POST /jobs with X-Request-Id to
     the 3 peers in turn.
  4. RSS of the control-plane processes: Flink JobManager leader and standby; our peer
     process without its children (zygote, job processes), idle and with 12 jobs running.

Outputs (default --out): bench/results/vs_flink.md (tables, also printed), vs_flink.json
(raw numbers), vs_flink.png (bar chart). Every process this script starts is stopped on
every exit path (finally, SIGTERM, SIGINT) and checked to be gone at the end.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench import flinkdist  # noqa: E402
from bench.common import ROOT, _interrupt  # noqa: E402
from bench.vsflink.flink import flink_failover, flink_submission  # noqa: E402
from bench.vsflink.ours import ours_failover, ours_submission  # noqa: E402
from bench.vsflink.procs import (FLINK_DIR, FLINK_VERSION, RESULTS, RUN_MARKERS, check_setup,  # noqa: E402
                                 leftovers, log, setup)
from bench.vsflink.report import chart, render, summarize  # noqa: E402


# ----------------------------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=3, help="trials per Flink failover case")
    ap.add_argument("--ours-trials", type=int, default=10,
                    help="trials per failover case of ours (a fresh cluster each, ~5 s)")
    ap.add_argument("--jobs", default="4,12", help="streaming jobs K, comma-separated")
    ap.add_argument("--submit-runs", type=int, default=3)
    ap.add_argument("--flink-submit-jobs", type=int, default=40, help="jobs per Flink run")
    ap.add_argument("--ours-submit-jobs", type=int, default=500, help="jobs per run of ours")
    ap.add_argument("--warmup-jobs", type=int, default=80,
                    help="unmeasured submissions before the submission runs (both systems)")
    ap.add_argument("--window", type=float, default=10.0,
                    help="s to watch Flink's jobs after the standby JobManager is killed")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 trial, 4 jobs, 1 submission run of few jobs")
    ap.add_argument("--skip-setup", action="store_true",
                    help="use bench/.flink as it is (no download, unzip or compile)")
    ap.add_argument("--only", choices=("flink", "ours"), default=None,
                    help="run one system only (for debugging)")
    ap.add_argument("--out", default=os.path.join(RESULTS, "vs_flink"),
                    help="output prefix (.md, .json, .png are added)")
    args = ap.parse_args()
    if args.quick:
        args.trials, args.ours_trials, args.jobs = 1, 1, "4"
        args.submit_runs, args.flink_submit_jobs, args.ours_submit_jobs = 1, 12, 60
        args.warmup_jobs = 4
        args.window = 5.0
    ours_trials = args.ours_trials
    ks = [int(x) for x in args.jobs.split(",")]
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    t_begin = time.monotonic()
    if args.skip_setup:
        check_setup()
    else:
        flinkdist.ensure_home(FLINK_VERSION, log=log)  # the download shared with the tests
        setup()
    run_dir = os.path.join(FLINK_DIR, "run", time.strftime("%Y%m%d-%H%M%S"))
    for old in os.listdir(os.path.join(FLINK_DIR, "run")) if os.path.isdir(
            os.path.join(FLINK_DIR, "run")) else []:
        shutil.rmtree(os.path.join(FLINK_DIR, "run", old), ignore_errors=True)
    os.makedirs(run_dir)
    RUN_MARKERS.append(run_dir)
    data: dict = {}
    timeout = 300.0
    phases_s: dict = {}
    try:
        if args.only in (None, "ours"):
            t0 = time.monotonic()
            data["ours_submission"] = ours_submission(run_dir, args.submit_runs,
                                                      args.ours_submit_jobs, [1, 8],
                                                      args.warmup_jobs)
            for profile in ("default", "fast"):
                data[f"ours_{profile}"] = ours_failover(run_dir, profile, ks, ours_trials,
                                                        timeout)
            phases_s["ours"] = time.monotonic() - t0
        if args.only in (None, "flink"):
            t0 = time.monotonic()
            data["flink_submission"] = flink_submission(run_dir, args.submit_runs,
                                                        args.flink_submit_jobs, [1, 8],
                                                        args.warmup_jobs)
            for profile in ("tuned", "default"):
                data[f"flink_{profile}"] = flink_failover(run_dir, profile, ks, args.trials,
                                                          args.window, timeout)
            phases_s["flink"] = time.monotonic() - t0
    finally:
        left = leftovers()
        if left:
            log("processes left behind (killing them by PID): " + "; ".join(left))
            for line in left:
                try:
                    os.kill(int(line.split()[0]), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
    left = leftovers()
    log("no process left behind" if not left else f"STILL ALIVE: {left}")
    summary = summarize(data, ks)
    meta = {"time": time.strftime("%Y-%m-%d %H:%M"), "host": socket.gethostname(),
            "cpus": os.cpu_count(), "command": "`" + " ".join(
                [".venv/bin/python", "bench/vs_flink.py", *sys.argv[1:]]) + "`",
            "flink_version": FLINK_VERSION, "duration_s": time.monotonic() - t_begin,
            "phases_s": phases_s, "ks": ks, "flink_trials": args.trials,
            "ours_trials": ours_trials, "window": args.window, "warmup": args.warmup_jobs,
            "java": subprocess.run(
                ["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0],
            "leftover_processes": left}
    text = render(summary, meta)
    text += (f"\nFull run: {meta['duration_s'] / 60:.1f} min. Raw numbers: "
             f"`{os.path.relpath(args.out, ROOT)}.json`.\n")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump({"meta": meta, "summary": summary, "data": data}, f, indent=1, default=str)
    with open(args.out + ".md", "w") as f:
        f.write(text)
    chart(summary, args.out + ".png")
    print(text)
    return 0 if not left else 1


if __name__ == "__main__":
    sys.exit(main())
