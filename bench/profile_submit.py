"""Where an accepted submission's time goes: C closed-loop clients (bench/submit.py's)
submit trivial jobs to 3 real peers (fsync on) while py-spy samples every peer process
and this process's clients (only threads holding the GIL: Python at work), and the
kernel counts each role's CPU (peers, zygotes with the jobs they fork, clients).

    .venv/bin/python bench/profile_submit.py [--clients 1,8,64] [--jobs 3000]
                                             [--out bench/results/profile-submit.json]
    .venv/bin/python bench/profile_submit.py --no-profile --runs 3 --jobs 10000
    .venv/bin/python bench/profile_submit.py --held ...   # the accept path alone
    .venv/bin/python bench/profile_submit.py --drain 10 --jobs 4000   # what a run costs

(--no-profile: no py-spy, the rates alone; --runs N: N clusters one after the other, each
running every client count, and the medians of accepted/s and p50/p99 per count;
--held: every slot held by a sleeping job first, so that the submissions wait and none
runs: the accept path alone, without the jobs' runs beside it; --drain S: a backlog of
--jobs trivial jobs submitted first, then S seconds of it draining with nothing submitted:
jobs finished a second and what each run costs, CPU ms by role (the peers, the zygotes'
forks, the job processes), Raft journal entries and fsyncs.)

Reported per client count: accepted/s, accept p50/p99, CPU ms per accepted job per role,
the machine's speed just before and after the load (`probe_us`, bench/probe.py: this VM's
speed moves by half within minutes),
how the machine's cores were spent meanwhile (busy, idle, stolen by the hypervisor),
the peers' Raft journal fsyncs per 1000 jobs, their batches of submissions (Raft writes,
jm_raft_write_seconds) by the writing peer's role with their mean commit time and the jobs a
batch, and the jobs followers relayed into the leader's batches with their mean time, the
peers' threads (event loops, the others) in cores running and cores waiting for a CPU, and
the peers' Python samples by package and by function (bench/profile_sql.py's summary).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import (BenchCluster, cpu_ticks, get, machine_cores, median, post,  # noqa: E402
                          report, sched_rates, thread_sched, wait_until)
from bench.probe import speed_probe  # noqa: E402
from bench.profile_sql import cpu_seconds, record, stop, summarize  # noqa: E402
from bench.submit import (JOB, closed_loop, journal_fsyncs, run_load,  # noqa: E402
                          submission_writes, write_latency)
from bench.submit import cpu_seconds as run_cpu_seconds  # noqa: E402


def roles(c: BenchCluster) -> dict[str, list[int]]:
    import psutil
    out: dict[str, list[int]] = {"peer": c.pids(), "zygote": [], "client": [os.getpid()]}
    for pid in c.pids():
        for child in psutil.Process(pid).children():
            if "jm.runtime.zygote" in " ".join(child.cmdline()):
                out["zygote"].append(child.pid)
    return out


def one_count(c: BenchCluster, clients: int, jobs: int, profile: bool = True,
              seen: Optional[set] = None) -> dict:
    """`seen`: the job ids earlier counts on this cluster were given; an answer naming one
    of them (or the same one twice) was a replay, not an accepted submission."""
    pids = roles(c)
    probe = speed_probe()  # (the machine's speed just before the load, and after; run
    # outside py-spy's window: this process's samples are the clients')
    with tempfile.TemporaryDirectory(prefix="jm-profile-") as folder:
        spies = record({k: v for k, v in pids.items() if k != "zygote"}, None, folder) \
            if profile else []
        before, fs0, ticks = cpu_seconds(pids), journal_fsyncs(c.urls), cpu_ticks()
        w0, th0 = submission_writes(c.urls), thread_sched(pids["peer"])
        sat = run_load(closed_loop(c.urls, jobs, clients))
        used, fs1 = cpu_seconds(pids), journal_fsyncs(c.urls)
        w1, th1 = submission_writes(c.urls), thread_sched(pids["peer"])
        cores = machine_cores(ticks, cpu_ticks(), sat["elapsed"])
        stacks = stop(spies)
    seen = set() if seen is None else seen
    fresh = set(sat["ids"]) - seen
    if len(fresh) != len(sat["ids"]):
        raise RuntimeError(f"{len(sat['ids']) - len(fresh)} answers named a job already "
                           "accepted: replays, not submissions")
    seen |= fresh
    n = max(1, sat["accepted"])
    return {"clients": clients, "accepted": sat["accepted"], "accepted_per_s": round(sat["rate"]),
            "p50_ms": round(sat["p50_ms"], 1), "p99_ms": round(sat["p99_ms"], 1),
            "cpu_ms_per_job": {k: round(1000 * (used[k] - before[k]) / n, 2) for k in used},
            "probe_us": [probe, speed_probe()],
            "fsyncs_per_1000_jobs": round(1000 * (fs1["fsyncs"] - fs0["fsyncs"]) / n, 1),
            "seconds": round(sat["elapsed"], 2), "machine_cores": cores,
            "writes": write_latency(w0, w1, n),
            "peer_threads": sched_rates(th0, th1, sat["elapsed"]),
            "cpu": {role: summarize(s) for role, s in sorted(stacks.items())}}


def drain(c: BenchCluster, jobs: int, seconds: float, profile: bool = True) -> dict:
    """A backlog of `jobs` trivial jobs (64 clients), then `seconds` of it draining: what
    one job's run costs, by role (the job processes' CPU is their zygote's children's, as
    each is reaped)."""
    run_load(closed_loop(c.urls, jobs, 64))
    pids = roles(c)

    def cpu() -> dict:
        used = run_cpu_seconds(c.pids())
        return {k: used[k] for k in ("peers", "zygotes", "jobs")}

    def finished() -> int:
        return get(c.urls[0] + "/overview")["jobs-finished"]
    with tempfile.TemporaryDirectory(prefix="jm-profile-") as folder:
        spies = record({k: v for k, v in pids.items() if k != "client"}, seconds, folder) \
            if profile else []
        n0, cpu0, fs0, ticks, t0 = finished(), cpu(), journal_fsyncs(c.urls), cpu_ticks(), \
            time.monotonic()
        time.sleep(seconds)  # (a fixed window of the drain, measured)
        n1, cpu1, fs1 = finished(), cpu(), journal_fsyncs(c.urls)
        elapsed = time.monotonic() - t0
        cores = machine_cores(ticks, cpu_ticks(), elapsed)
        stacks = stop(spies)
    n = max(1, n1 - n0)
    return {"backlog": jobs, "finished": n1 - n0, "finished_per_s": round(n / elapsed, 1),
            "cpu_ms_per_run": {k: round(1000 * (cpu1[k] - cpu0[k]) / n, 2) for k in cpu1},
            "journal_per_run": {k: round((fs1[k] - fs0[k]) / n, 2)
                                for k in ("entries", "fsyncs")},
            "machine_cores": cores, "seconds": round(elapsed, 2),
            "cpu": {role: summarize(s) for role, s in sorted(stacks.items())}}


def hold_every_slot(c: BenchCluster) -> None:
    """One job of 64 slots (jobmanager.slots) on each peer, sleeping: later jobs wait."""
    for i, url in enumerate(c.urls):
        post(url + "/jobs", dict(JOB, entry="trivial_job:hold", slots=64, name=f"hold-{i}"))

    def running() -> bool:
        jobs = get(c.urls[0] + "/jobs/overview")["jobs"]
        return sum(1 for j in jobs if j["state"] == "RUNNING") == len(c.urls)
    wait_until(running, 60, "every slot held")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", default="1,8,64")
    ap.add_argument("--jobs", type=int, default=3000, help="jobs per client count")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--no-profile", dest="profile", action="store_false")
    ap.add_argument("--held", action="store_true",
                    help="every slot held by a sleeping job first: the submissions wait, "
                         "none runs (the accept path alone)")
    ap.add_argument("--drain", type=float, default=0, metavar="SECONDS",
                    help="a backlog of --jobs jobs, then SECONDS of it draining: what a "
                         "job's run costs")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if a.drain:
        runs = []
        for _ in range(a.runs):
            with BenchCluster(3, {"spark.connect.embedded": False,
                                  "jobmanager.slots": 64}) as c:
                wait_until(lambda: get(c.urls[0] + "/overview")["peers-alive"] == 3, 30,
                           "3 peers")
                runs.append(drain(c, a.jobs, a.drain, a.profile))
        report({"drain": runs, "median_finished_per_s":
                median([r["finished_per_s"] for r in runs])}, a.out)
        return 0
    counts = [int(x) for x in a.clients.split(",")]
    out: dict = {"jobs": a.jobs, "held": a.held, "runs": [], "medians": {}}
    for _ in range(a.runs):
        run = []
        with BenchCluster(3, {"spark.connect.embedded": False, "jobmanager.slots": 64}) as c:
            wait_until(lambda: get(c.urls[0] + "/overview")["peers-alive"] == 3, 30, "3 peers")
            if a.held:
                hold_every_slot(c)
            seen: set = set()
            for n in counts:
                run.append(one_count(c, n, a.jobs if n > 1 else a.jobs // 10, a.profile, seen))
        out["runs"].append(run)
    for i, n in enumerate(counts):
        of = [run[i] for run in out["runs"]]
        out["medians"][n] = {k: median([r[k] for r in of])
                             for k in ("accepted_per_s", "p50_ms", "p99_ms")}
    if a.runs == 1:
        out["counts"] = out.pop("runs")[0]
    report(out, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
