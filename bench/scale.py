"""Scale benchmark (issue 27): N real peers started with bin/ (no Spark), measured for
what adding peers and records costs.

Per cluster size (--peers 3,9,25):
  * idle CPU of each peer process over --idle seconds (the leader, the followers, the
    non-voting members: raft.voters is 3 unless --voters says otherwise, "all" for every
    peer a voter);
  * submit latency p50/p99 with 1 and with 8 clients (every peer drained meanwhile: the
    jobs stay CREATED and run nothing; cancelled afterwards);
  * time to RUNNING for --burst trivial jobs (first submission -> the last RUNNING
    timestamp);
  * failover: kill -9 of a follower, a non-voter and the leader, probe jobs on every
    peer: the time until the victim's jobs are RUNNING elsewhere, and other jobs
    restarted (must be 0).
With --ended N (e.g. 50000), N ended job records are made first (submitted while every
peer is drained, then cancelled), and also measured: GET /jobs/overview (Flink's whole
list), a page of GET /jobs and a job's page, p50/p99, while a client polls the overview
every second; the event-loop lag p99 (jm_event_loop_lag_seconds) meanwhile; the leader's
RSS, its last snapshot's size and the time it took (jm_raft_snapshot_*: its start on the
Raft thread, and the whole); a restarted follower's and non-voter's time to serving
(ready, its replica holding every record: the follower replays its journal, the
non-voter, which keeps none, gets the leader's snapshot).

    .venv/bin/python bench/scale.py --peers 3,9,25
    .venv/bin/python bench/scale.py --peers 4 --ended 50000
    .venv/bin/python bench/scale.py --peers 25 --voters all    # every peer votes
"""
from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import signal
import subprocess
import sys
import time
from typing import Optional

import aiohttp
import psutil

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.common import ROOT, BenchCluster, get, median, pct, wait_until  # noqa: E402
from bench.failover import nodes  # noqa: E402

UNPLACED = {"entry": "trivial_job:main", "pyfiles": [os.path.join(ROOT, "bench") + "/"]}
TRIVIAL = {"entry": "trivial_job:main", "pyfiles": [os.path.join(ROOT, "bench") + "/"],
           "restart-strategy": {"type": "none"}}
PROBE = {"entry": "probe:main", "pyfiles": [os.path.join(ROOT, "chaos") + "/"]}


def idle_cpu(pids: dict[str, int], seconds: float) -> dict[str, float]:
    """% of one core used by each peer process (not its children) over `seconds`."""
    procs = {n: psutil.Process(p) for n, p in pids.items()}
    before = {n: sum(p.cpu_times()[:2]) for n, p in procs.items()}
    time.sleep(seconds)  # the measuring window
    return {n: 100 * (sum(p.cpu_times()[:2]) - before[n]) / seconds for n, p in procs.items()}


async def _timed(session: aiohttp.ClientSession, method: str, url: str,
                 body: dict | None = None, accept: tuple = ()) -> tuple[float, dict]:
    """A request, retried while the cluster answers 503 (no leader, or a write whose
    outcome is unknown); `accept`: error statuses that count as done (a cancel retried
    after its first try did commit: 409, already ended)."""
    t0 = time.perf_counter()
    for _ in range(100):
        async with session.request(method, url, json=body) as r:
            out = await r.json(content_type=None)
            if r.status < 500:
                if r.status >= 400 and r.status not in accept:
                    raise RuntimeError(f"{method} {url}: {r.status} {out}")
                return time.perf_counter() - t0, out
        await asyncio.sleep(0.05)  # no leader for a moment: retry
    raise RuntimeError(f"{method} {url}: no answer")


async def submit_clients(urls: list[str], jobs: int, clients: int, spec: dict
                         ) -> tuple[list[float], list[str]]:
    """`jobs` submissions from `clients` closed-loop clients spread over the peers."""
    lat: list[float] = []
    ids: list[str] = []
    counter = iter(range(jobs))

    async def client(k: int) -> None:
        async with aiohttp.ClientSession() as s:
            for i in counter:
                dt, out = await _timed(s, "POST", urls[(k + i) % len(urls)] + "/jobs",
                                       dict(spec, name=f"s{i}"))
                lat.append(dt)
                ids.append(out["jobid"])
    await asyncio.gather(*(client(k) for k in range(clients)))
    return lat, ids


async def cancel_all(urls: list[str], ids: list[str], clients: int = 8) -> None:
    it = iter(ids)

    async def client(k: int) -> None:
        async with aiohttp.ClientSession() as s:
            for j in it:
                await _timed(s, "PATCH", urls[k % len(urls)] + f"/jobs/{j}?mode=cancel",
                             accept=(409,))
    await asyncio.gather(*(client(k) for k in range(clients)))


def drain_all(urls: list[str], drain: bool) -> None:
    from bench.common import request
    for node in nodes(urls[0]):
        request("POST" if drain else "DELETE", urls[0] + f"/nodes/{node}/drain")


def make_ended(urls: list[str], n: int) -> float:
    t0 = time.monotonic()
    done = 0
    while done < n:  # in chunks, so that the pending list stays short
        k = min(5000, n - done)
        _, ids = asyncio.run(submit_clients(urls, k, 8, UNPLACED))
        asyncio.run(cancel_all(urls, ids))
        done += k
    return time.monotonic() - t0


def burst_to_running(c: BenchCluster, jobs: int) -> float:
    t0 = time.time()
    _, ids = asyncio.run(submit_clients(c.urls, jobs, 8, TRIVIAL))
    wanted = set(ids)

    def all_ran():
        rows = get(c.urls[0] + "/jobs?state=FINISHED,FAILED&limit=1000", timeout=30)
        seen = [r for r in rows["jobs"] if r["jid"] in wanted]
        return seen if len(seen) == len(wanted) else None
    wait_until(all_ran, 600, "the burst's jobs ended", interval=0.5)
    running = [get(c.urls[0] + f"/jobs/{j}")["timestamps"].get("RUNNING", 0) / 1000
               for j in ids]
    return max(running) - t0


def lag_buckets(url: str) -> dict[float, float]:
    """The cumulative buckets of this peer's jm_event_loop_lag_seconds."""
    import urllib.request
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        text = r.read().decode()
    buckets = {}
    for line in text.splitlines():
        if line.startswith("jm_event_loop_lag_seconds_bucket"):
            le = line.split('le="')[1].split('"')[0]
            buckets[float("inf") if le == "+Inf" else float(le)] = float(line.split()[-1])
    return buckets


def bucket_p99(before: dict, after: dict) -> float:
    """The upper bound of the bucket holding the 99th percentile of what was observed
    between two scrapes of a cumulative histogram."""
    delta = sorted((le, after[le] - before.get(le, 0.0)) for le in after)
    total = delta[-1][1] if delta else 0.0
    for le, count in delta:
        if total and count >= 0.99 * total:
            return le
    return float("nan")


async def reads_under_polling(url: str, seconds: float, job_id: str) -> dict:
    """Overview polled every second by one client; meanwhile pages and a job's page."""
    ov, page, one = [], [], []
    end = time.monotonic() + seconds
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as s:
        async def poller():
            while time.monotonic() < end:
                t0 = time.perf_counter()
                async with s.get(url + "/jobs/overview") as r:
                    await r.read()
                ov.append(time.perf_counter() - t0)
                await asyncio.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))

        async def reader():
            while time.monotonic() < end:
                page.append((await _timed(s, "GET", url + "/jobs?limit=100"))[0])
                one.append((await _timed(s, "GET", url + f"/jobs/{job_id}"))[0])
                await asyncio.sleep(0.1)
        await asyncio.gather(poller(), reader())
    ms = lambda v, p: round(pct(v, p) * 1000, 1)  # noqa: E731
    return {"overview_p50_ms": ms(ov, 50), "overview_p99_ms": ms(ov, 99),
            "page_p50_ms": ms(page, 50), "page_p99_ms": ms(page, 99),
            "job_p50_ms": ms(one, 50), "job_p99_ms": ms(one, 99)}


def scrape(url: str) -> dict[str, float]:
    """A peer's /metrics: each sample's value by metric name (labels left out)."""
    import urllib.request
    with urllib.request.urlopen(url, timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out.setdefault(name.split("{", 1)[0], float(value))
    return out


def restart_to_serving(c: BenchCluster, victim: dict, total: int) -> float:
    pid_file = os.path.join(c.base, "run", f"jm-{getpass.getuser()}-127.0.0.1_"
                                           f"{victim['rest-port']}.pid")
    with open(pid_file) as fh:  # (the process started last on that port)
        os.kill(int(fh.read()), signal.SIGKILL)
    line = f"127.0.0.1:{victim['rest-port']}:{victim['raft-port']}"
    url = f"http://127.0.0.1:{victim['rest-port']}"
    t0 = time.monotonic()
    subprocess.run([os.path.join(ROOT, "bin", "jobmanager.sh"), "start", line], env=c.env,
                   check=True, capture_output=True, timeout=60)

    def serving():  # ready, and reading the whole state from its replica
        return get(url + "/readyz").get("ready") and \
            get(url + "/jobs?limit=1", timeout=30)["total"] >= total
    wait_until(serving, 120, "the restarted peer serving", interval=0.05)
    return time.monotonic() - t0


def kill_and_time(urls: list[str], kind: str) -> Optional[dict]:
    """SIGKILL the leader, or the follower (a voter) or non-voter holding most jobs; the
    time until each of its jobs is RUNNING elsewhere (the cluster's RUNNING time stamps),
    and how many other running jobs got a new attempt or a restart (must be 0). Reads
    only the jobs it needs: a whole overview per poll would load the cluster it measures.
    None if there is no peer of that kind."""
    ns = nodes(urls[0])
    leader = next(n for n, v in ns.items() if v["leader"])
    role = {"follower": "follower", "non-voter": "non-voter"}.get(kind)
    pool = [n for n, v in ns.items() if v["state"] == "ALIVE" and v["raft-role"] == role]
    if kind != "leader" and not pool:
        return None
    victim = leader if kind == "leader" else max(pool, key=lambda n: len(ns[n]["jobs"]))
    v = ns[victim]
    survivor = next(u for u in urls if not u.endswith(f":{v['rest-port']}"))
    running = [r["id"] for r in get(survivor + "/jobs?state=RUNNING&limit=1000")["jobs"]]
    before = {j: get(f"{survivor}/jobs/{j}") for j in running}
    mine = [j for j in running if before[j]["node"] == victim]
    if not mine:  # nothing to time (and nothing would ever have "moved")
        print(f"failover {kind}: {victim} runs no job; not killed", file=sys.stderr)
        return None
    t_kill = time.time()
    os.kill(v["pid"], signal.SIGKILL)

    def moved():
        now = {j: get(f"{survivor}/jobs/{j}") for j in mine}
        return now if all(r["state"] == "RUNNING" and r["node"] != victim and
                          r["attempt"] > before[j]["attempt"] for j, r in now.items()) else None
    now = wait_until(moved, 120, "the victim's jobs RUNNING elsewhere", interval=0.05)
    after = {j: get(f"{survivor}/jobs/{j}") for j in running if j not in mine}
    others = sum(1 for j, r in after.items()
                 if (r["attempt"], r["restarts"]) != (before[j]["attempt"],
                                                      before[j]["restarts"]))
    ran = [r["timestamps"]["RUNNING"] / 1000 for r in now.values()]
    return {"victim": victim, "record": v, "survivor": survivor,
            "failover_s": max(ran) - t_kill if ran else 0.0, "others_restarted": others}


def run_size(n: int, args) -> dict:
    settings = {"spark.connect.embedded": False, "jobmanager.executor.preload": "none",
                "jobmanager.slots": 8, "restart-strategy.type": "none",
                "jobstore.max-capacity": max(10000, args.ended + 10000)}
    if args.voters:  # "all": every peer votes (as before the voting core)
        settings["raft.voters"] = n if args.voters == "all" else int(args.voters)
    out: dict = {"peers": n, "ended": args.ended}
    with BenchCluster(n, settings) as c:
        wait_until(lambda: sum(v["state"] == "ALIVE" for v in nodes(c.urls[0]).values()) == n,
                   120, "every peer registered")
        drain_all(c.urls, True)  # submissions stay CREATED (nothing runs) until undrained
        if args.ended:
            out["make_ended_s"] = round(make_ended(c.urls, args.ended), 1)
        ns = nodes(c.urls[0])
        leader = next(k for k, v in ns.items() if v["leader"])
        out["rss_leader_mb"] = round(psutil.Process(ns[leader]["pid"]).memory_info().rss
                                     / 2**20, 1)
        if args.ended:  # the leader's last snapshot, taken while the records were made
            m = scrape(f"http://127.0.0.1:{ns[leader]['rest-port']}/metrics")
            if m.get("jm_raft_snapshots_total"):
                out["snapshot_s"] = round(m["jm_raft_snapshot_seconds"], 2)
                out["snapshot_start_ms"] = round(m["jm_raft_snapshot_start_seconds"] * 1000, 1)
        out["voters"] = sum(v["raft-role"] in ("leader", "follower") for v in ns.values())
        if "idle" in args.phases:
            cpu = idle_cpu({k: v["pid"] for k, v in ns.items()}, args.idle)
            out["idle_cpu_leader_pct"] = round(cpu[leader], 2)
            for role in ("follower", "non-voter"):
                of_role = [cpu[k] for k, v in ns.items() if v["raft-role"] == role]
                if of_role:
                    out[f"idle_cpu_{role.replace('-', '')}_pct"] = round(median(of_role), 2)
        for clients in (1, 8) if "submit" in args.phases else ():
            lat, ids = asyncio.run(submit_clients(c.urls, args.submits, clients, UNPLACED))
            out[f"submit_{clients}c_p50_ms"] = round(pct(lat, 50) * 1000, 1)
            out[f"submit_{clients}c_p99_ms"] = round(pct(lat, 99) * 1000, 1)
            asyncio.run(cancel_all(c.urls, ids))
        drain_all(c.urls, False)
        if "burst" in args.phases:
            out["burst_jobs"] = args.burst
            out["burst_to_running_s"] = round(burst_to_running(c, args.burst), 2)
        if args.ended and "reads" in args.phases:
            url = c.urls[-1]
            job_id = get(url + "/jobs?limit=1")["jobs"][0]["id"]
            before = lag_buckets(url)
            out.update(asyncio.run(reads_under_polling(url, args.poll, job_id)))
            out["loop_lag_p99_ms"] = round(bucket_p99(before, lag_buckets(url)) * 1000, 1)
        if "failover" not in args.phases:
            return out
        probes = os.path.join(c.base, "probes")
        asyncio.run(submit_clients(c.urls, n * 2, 1, dict(PROBE, args={"dir": probes})))
        wait_until(lambda: get(c.urls[0] + "/jobs?state=RUNNING&limit=1")["total"] == n * 2,
                   120, "probes running")
        for kind in ("follower", "non-voter", "leader"):
            k = kill_and_time(c.urls, kind)
            if k is None:
                continue
            key = kind.replace("-", "")
            out[f"failover_{key}_s"] = round(k["failover_s"], 2)
            out[f"failover_{key}_others_restarted"] = k["others_restarted"]
            v = k["record"]
            line = f"127.0.0.1:{v['rest-port']}:{v['raft-port']}"
            subprocess.run([os.path.join(ROOT, "bin", "jobmanager.sh"), "start", line],
                           env=c.env, check=True, capture_output=True, timeout=60)
            wait_until(lambda: nodes(k["survivor"])[k["victim"]]["state"] == "ALIVE", 120,
                       "the victim back")
        if args.ended:
            ns = nodes(c.urls[0])
            total = get(c.urls[0] + "/jobs?limit=1")["total"]
            leader = next(v for v in ns.values() if v["leader"])
            dump = os.path.join(c.base, "data", f"127.0.0.1_{leader['raft-port']}", "raft",
                                "raft.dump")
            if os.path.exists(dump):  # the leader's last snapshot
                out["snapshot_mb"] = round(os.path.getsize(dump) / 2**20, 1)
            for role in ("follower", "non-voter"):  # journal replay; the leader's snapshot
                v = next((v for v in ns.values() if v["raft-role"] == role), None)
                if v is not None:
                    key = f"restart_to_serving_{role.replace('-', '')}_s"
                    out[key] = round(restart_to_serving(c, v, total), 2)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peers", default="3,9,25")
    ap.add_argument("--ended", type=int, default=0)
    ap.add_argument("--idle", type=float, default=10.0)
    ap.add_argument("--submits", type=int, default=200)
    ap.add_argument("--burst", type=int, default=300)
    ap.add_argument("--poll", type=float, default=20.0)
    ap.add_argument("--phases", default="idle,submit,burst,reads,failover",
                    help="what to measure (comma-separated)")
    ap.add_argument("--voters", default="",
                    help="raft.voters (default: the peers' default, 3); 'all': every peer")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    args.phases = set(args.phases.split(","))
    results = []
    for n in [int(x) for x in args.peers.split(",")]:
        r = run_size(n, args)
        print(json.dumps(r), flush=True)
        results.append(r)
    out = args.out or os.path.join(ROOT, "bench", "results",
                                   f"scale-{args.peers.replace(',', '_')}-{args.ended}.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as fh:
        json.dump({"results": results, "args": {**vars(args), "phases": sorted(args.phases)}},
                  fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
