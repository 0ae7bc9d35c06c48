"""Submission benchmark: 3 real peers (HA always on: every submission is a replicated
Raft write acknowledged after it is applied on the answering peer), clients posting
trivial jobs (they return at once) spread over all peers.

Measures, per run, then the median over runs:
  * saturation: accepted jobs/s with --clients closed-loop clients;
  * latency at a fixed offered rate (--rate, open loop): p50/p99 accept latency;
  * job start latency (CREATED -> RUNNING, from the cluster's own timestamps) at a
    steady rate the cluster sustains (--steady-rate), and completed jobs/s of the
    saturation phase (first submission -> last job FINISHED);
  * CPU per job of the peers, zygotes, job processes and of this client;
  * RSS of one idle peer process (without its children: zygote, job processes).

    .venv/bin/python bench/submit.py                 # 3 runs, default sizes
    .venv/bin/python bench/submit.py --runs 5 --jobs 3000 --rate 500
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid

import psutil
import uvloop

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.common import ROOT, BenchCluster, get, median, pct, wait_until  # noqa: E402
from bench.httpload import Client  # noqa: E402
from jm.policy.jobs.vocab import TERMINAL  # noqa: E402

JOB = {"entry": "trivial_job:main", "pyfiles": [os.path.join(ROOT, "bench") + "/"],
       "restart-strategy": {"type": "none"}}


async def _post(client: Client, url: str, i: int, tag: str) -> tuple[float, str | None]:
    """One submission, retried after a 503 (no leader) with the same request id. `tag`
    names the load that sends it: a request id reused by a later load of the same
    cluster would be answered from the peers' request-id table (the first load's job,
    no write), not measured."""
    t0 = time.perf_counter()
    for _ in range(50):
        status, body = await client.post_json(url, "/jobs", dict(JOB, name=f"b{i}"),
                                              {"X-Request-Id": f"bench-{tag}-{i}"})
        if status == 202:
            return time.perf_counter() - t0, body["jobid"]
        if status != 503:
            raise RuntimeError(f"HTTP {status}: {body}")
        await asyncio.sleep(0.05)  # retry pacing after a 503 (no leader)
    return time.perf_counter() - t0, None


def run_load(load) -> dict:
    """A load's coroutine run on uvloop (as the peers' own loops are): the clients share
    the machine with the peers they measure, and on asyncio's own loop they cost about
    half as much again of CPU per request (GET /healthz at 64 clients, 3 peers: 0.18
    against 0.12 ms a request), CPU the peers then do not have."""
    return uvloop.run(load)


async def closed_loop(urls: list[str], jobs: int, clients: int) -> dict:
    counter = iter(range(jobs))
    lat, ids = [], []
    tag = uuid.uuid4().hex[:12]

    async def client(k: int) -> None:
        http = Client()
        try:
            for i in counter:
                d, jid = await _post(http, urls[(i + k) % len(urls)], i, tag)
                lat.append(d)
                if jid:
                    ids.append(jid)
        finally:
            http.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(clients)))
    elapsed = time.perf_counter() - t0
    return {"accepted": len(ids), "elapsed": elapsed, "rate": len(ids) / elapsed,
            "p50_ms": pct(lat, 50) * 1000, "p99_ms": pct(lat, 99) * 1000, "ids": ids,
            "t0": t0}


async def open_loop(urls: list[str], jobs: int, rate: float, base: int) -> dict:
    lat, ids = [], []
    tag = uuid.uuid4().hex[:12]

    idle: list[Client] = []  # (requests of an open loop overlap: a pool of clients)

    async def one(i: int) -> None:
        http = idle.pop() if idle else Client()
        try:
            d, jid = await _post(http, urls[i % len(urls)], base + i, tag)
        finally:
            idle.append(http)  # (closed with the others when the load ends)
        lat.append(d)
        if jid:
            ids.append(jid)

    t0 = time.perf_counter()
    tasks = []
    for i in range(jobs):
        due = t0 + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)  # pacing of the offered load
        tasks.append(asyncio.create_task(one(i)))
    try:
        await asyncio.gather(*tasks)
    finally:
        for http in idle:
            http.close()
    elapsed = time.perf_counter() - t0
    return {"offered": rate, "accepted": len(ids), "achieved": len(ids) / elapsed,
            "p50_ms": pct(lat, 50) * 1000, "p99_ms": pct(lat, 99) * 1000, "ids": ids}


def job_stats(url: str, ids: list[str], timeout: float) -> dict:
    want = set(ids)

    def all_done():
        rows = {r["jid"]: r for r in get(url + "/jobs/overview", timeout=30)["jobs"]
                if r["jid"] in want}
        done = [r for r in rows.values() if r["state"] in TERMINAL]
        return rows if len(done) == len(want) else None

    wait_until(all_done, timeout, "all jobs finished", interval=0.5)
    starts, first_sub, last_end, failed, nodes = [], None, None, 0, {}
    for jid in ids:
        job = get(f"{url}/jobs/{jid}", timeout=30)
        ts = job["timestamps"]
        if job["state"] != "FINISHED":
            failed += 1
        if "RUNNING" in ts:
            starts.append((ts["RUNNING"] - ts["CREATED"]))
        first_sub = min(first_sub or ts["CREATED"], ts["CREATED"])
        last_end = max(last_end or job["end-time"], job["end-time"])
        nodes[job["node"]] = nodes.get(job["node"], 0) + 1
    span = (last_end - first_sub) / 1000
    return {"finished": len(ids) - failed, "failed": failed, "start_p50_ms": pct(starts, 50),
            "start_p99_ms": pct(starts, 99), "completed_per_s": (len(ids) - failed) / span,
            "per_node": nodes}


def cpu_seconds(pids: list[int]) -> dict:
    """CPU used so far by the peers, their zygotes and the (reaped) job processes."""
    out = {"peers": 0.0, "zygotes": 0.0, "jobs": 0.0, "spark": 0.0,
           "client": sum(os.times()[:2])}
    for pid in pids:
        p = psutil.Process(pid)
        t = p.cpu_times()
        out["peers"] += t.user + t.system
        for child in p.children():
            ct = child.cpu_times()
            kind = "zygotes" if "jm.runtime.zygote" in " ".join(child.cmdline()) else "spark"
            out[kind] += ct.user + ct.system
            if kind == "zygotes":
                out["jobs"] += ct.children_user + ct.children_system
    return out


def consistent(urls: list[str]) -> bool:
    """Every peer's replica shows the same jobs in the same states (once quiet)."""
    def views():
        return [sorted((r["jid"], r["state"], r["attempt"], r["node"])
                       for r in get(u + "/jobs/overview", timeout=30)["jobs"]) for u in urls]
    try:
        wait_until(lambda: (lambda v: all(x == v[0] for x in v))(views()), 30,
                   "replicas identical", interval=0.5)
        return True
    except TimeoutError:
        return False


def idle_rss_mb(pids: list[int]) -> list[float]:
    return [psutil.Process(p).memory_info().rss / 2 ** 20 for p in pids]


def _samples(urls: list[str]):
    """Every sample of the peers' /metrics (prometheus_client's parser)."""
    import urllib.request
    from prometheus_client.parser import text_string_to_metric_families
    for url in urls:
        with urllib.request.urlopen(url + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
        for fam in text_string_to_metric_families(text):
            yield from fam.samples


def journal_fsyncs(urls: list[str]) -> dict:
    """The peers' Raft journal fsyncs so far (raft.fsync), summed from their /metrics."""
    names = {"jm_raft_fsyncs_total": "fsyncs", "jm_raft_fsynced_entries_total": "entries",
             "jm_raft_fsync_seconds_total": "seconds"}
    out = dict.fromkeys(names.values(), 0.0)
    for smp in _samples(urls):
        if smp.name in names:  # (the series carry a peer label)
            out[names[smp.name]] += smp.value
    return out


def submission_writes(urls: list[str]) -> dict:
    """The peers' Raft writes of submissions so far (`jm_raft_write_seconds`), by the
    writing peer's role: {role: [count, seconds]} for the batches (command SubmitJobs),
    and "relayed" for the jobs followers relayed into the leader's batches (SubmitJob)."""
    out = {"leader": [0, 0.0], "follower": [0, 0.0], "relayed": [0, 0.0]}
    for smp in _samples(urls):
        command, role = smp.labels.get("command"), smp.labels.get("role")
        key = role if command == "SubmitJobs" else "relayed" if command == "SubmitJob" else None
        if key not in out:
            continue
        if smp.name == "jm_raft_write_seconds_count":
            out[key][0] += int(smp.value)
        elif smp.name == "jm_raft_write_seconds_sum":
            out[key][1] += smp.value
    return out


def write_latency(before: dict, after: dict, jobs: int) -> dict:
    """Between two `submission_writes`: batches (Raft writes) by role and the jobs relayed,
    their mean time from submission until applied on the writing peer, and jobs a batch
    (all roles)."""
    out: dict = {}
    total = 0
    for role in ("leader", "follower", "relayed"):
        n = after[role][0] - before[role][0]
        total += n if role != "relayed" else 0
        out[role] = {"batches" if role != "relayed" else "jobs": n,
                     "mean_ms": round(1000 * (after[role][1] - before[role][1]) / n, 1)
                     if n else None}
    out["jobs_per_batch"] = round(jobs / total, 1) if total else None
    return out


def one_run(args, run: int) -> dict:
    settings = {"spark.connect.embedded": False, "jobmanager.slots": args.slots}
    for item in args.overrides:
        key, _, value = item.partition("=")
        settings[key] = value
    with BenchCluster(3, settings) as c:
        wait_until(lambda: get(c.urls[0] + "/overview")["peers-alive"] == 3, 30, "3 peers")
        time.sleep(2)  # let the peers settle before reading idle memory
        rss = idle_rss_mb(c.pids())
        cpu0 = cpu_seconds(c.pids())
        fs0 = journal_fsyncs(c.urls)
        sat = run_load(closed_loop(c.urls, args.jobs, args.clients))
        sat_jobs = job_stats(c.urls[0], sat["ids"], args.timeout)
        cpu1 = cpu_seconds(c.pids())
        fs1 = journal_fsyncs(c.urls)
        sat_jobs["cpu_s_per_1000_jobs"] = {k: round((cpu1[k] - cpu0[k]) * 1000 / args.jobs, 2)
                                           for k in cpu0}
        # all 3 peers' journals, over the submissions and the jobs' runs
        sat_jobs["journal_per_1000_jobs"] = {k: round((fs1[k] - fs0[k]) * 1000 / args.jobs, 3)
                                             for k in fs0}
        ol = run_load(open_loop(c.urls, args.rate_jobs, args.rate, args.jobs))
        ol_jobs = job_stats(c.urls[1], ol["ids"], args.timeout)
        st = run_load(open_loop(c.urls, args.steady_jobs, args.steady_rate,
                                args.jobs + args.rate_jobs))
        st_jobs = job_stats(c.urls[2], st["ids"], args.timeout)
        replicas = consistent(c.urls)
    out = {"run": run, "idle_rss_mb": rss, "replicas_identical": replicas,
           "saturation": {k: v for k, v in sat.items() if k not in ("ids", "t0")} | sat_jobs,
           "fixed_rate": {k: v for k, v in ol.items() if k != "ids"} | ol_jobs,
           "steady": {k: v for k, v in st.items() if k != "ids"} | st_jobs}
    print(json.dumps(out), flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2000, help="jobs per saturation run")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--rate", type=float, default=500.0, help="offered jobs/s (open loop)")
    ap.add_argument("--rate-jobs", type=int, default=2500)
    ap.add_argument("--steady-rate", type=float, default=50.0,
                    help="offered jobs/s for the start-latency phase (a rate the cluster sustains)")
    ap.add_argument("--steady-jobs", type=int, default=300)
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("-D", dest="overrides", action="append", default=[],
                    help="extra peer settings key=value (e.g. raft.use-batch=true)")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "submit.json"))
    args = ap.parse_args()
    runs = [one_run(args, r) for r in range(args.runs)]
    summary = {
        "accepted_per_s": median([r["saturation"]["rate"] for r in runs]),
        "saturation_accept_p50_ms": median([r["saturation"]["p50_ms"] for r in runs]),
        "saturation_accept_p99_ms": median([r["saturation"]["p99_ms"] for r in runs]),
        "fixed_rate_offered": args.rate,
        "fixed_rate_achieved": median([r["fixed_rate"]["achieved"] for r in runs]),
        "fixed_rate_accept_p50_ms": median([r["fixed_rate"]["p50_ms"] for r in runs]),
        "fixed_rate_accept_p99_ms": median([r["fixed_rate"]["p99_ms"] for r in runs]),
        "completed_per_s": median([r["saturation"]["completed_per_s"] for r in runs]),
        "steady_rate_offered": args.steady_rate,
        "steady_accept_p50_ms": median([r["steady"]["p50_ms"] for r in runs]),
        "steady_accept_p99_ms": median([r["steady"]["p99_ms"] for r in runs]),
        "steady_start_p50_ms": median([r["steady"]["start_p50_ms"] for r in runs]),
        "steady_start_p99_ms": median([r["steady"]["start_p99_ms"] for r in runs]),
        "idle_peer_rss_mb": median([max(r["idle_rss_mb"]) for r in runs]),
        "replicas_identical": all(r["replicas_identical"] for r in runs),
        "failed_jobs": sum(r[k]["failed"] for r in runs for k in ("saturation", "fixed_rate",
                                                                  "steady")),
        "cpu_ms_per_job": {k: median([r["saturation"]["cpu_s_per_1000_jobs"][k] for r in runs])
                           for k in runs[0]["saturation"]["cpu_s_per_1000_jobs"]},
        "journal_per_1000_jobs": {k: median([r["saturation"]["journal_per_1000_jobs"][k]
                                             for r in runs])
                                  for k in runs[0]["saturation"]["journal_per_1000_jobs"]},
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"args": vars(args), "runs": runs, "median": summary,
                   "time": time.strftime("%Y-%m-%d %H:%M:%S")}, f, indent=1)
    print("median over", args.runs, "runs:")
    for k, v in summary.items():
        print(f"  {k:28s} {v:.1f}" if isinstance(v, float) else f"  {k:28s} {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
