"""Our side of bench/vs_flink.py: 3 peers (bench.common.BenchCluster), failover and
submission trials."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import uuid

import psutil

from bench.common import ROOT, BenchCluster, get, wait_until
from bench.failover import PROFILES, kill_peer, nodes, post, snapshot
from bench.submit import JOB as TRIVIAL_JOB
from bench.vsflink.procs import (OUR_SETTINGS, RUN_MARKERS, closed_loop, completion, leftovers,
                                 log, rss_mb, wait_ended)


# ------------------------------------------------------------------------------------ ours

def _ours_base(run_dir: str, name: str) -> str:
    base = tempfile.mkdtemp(prefix=f"jm-vsflink-{name}-")
    RUN_MARKERS.append(base)
    return base


def _peer_pids_dead(pids: list[int]) -> None:
    wait_until(lambda: not any(psutil.pid_exists(p) and
                               psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                               for p in pids), 60, "peers gone",
               errors=(psutil.NoSuchProcess,))


def ours_trial(run_dir: str, profile: str, k: int, kind: str, timeout: float) -> dict:
    settings = {**OUR_SETTINGS, **PROFILES[profile]}
    base = _ours_base(run_dir, f"{profile}-{k}-{kind}")
    pids: list[int] = []
    try:
        with BenchCluster(3, settings, base=base) as c:
            pids = c.pids()
            wait_until(lambda: get(c.urls[0] + "/overview")["peers-alive"] == 3, 30, "3 peers")
            rss_idle = {p: rss_mb(p) for p in c.pids()}
            probe_dir = os.path.join(base, "probes")
            for i in range(k):
                post(c.urls[i % 3] + "/jobs", {"name": f"probe-{i}", "entry": "probe:main",
                                               "pyfiles": [os.path.join(ROOT, "chaos") + "/"],
                                               "args": {"dir": probe_dir}})
            wait_until(lambda: sum(r["state"] == "RUNNING"
                                   for r in snapshot(c.urls[0]).values()) == k,
                       60, "probes running")
            ns = nodes(c.urls[0])
            rss_jobs = {n: rss_mb(v["pid"]) for n, v in ns.items()}
            kill = kill_peer(c.urls, ns, kind == "leader", timeout)
            jobs_per_peer = sorted(len(x["jobs"]) for x in ns.values())
        _peer_pids_dead(pids)
    finally:
        if not leftovers():
            shutil.rmtree(base, ignore_errors=True)
    others = kill["others_restarted"]
    return {"kind": kind, "jobs": k, "jobs_per_peer": jobs_per_peer,
            "failover_s": kill["failover_s"],
            "moved": kill["moved"], "restarted": kill["moved"] + others,
            "surviving_restarted": others, "victim_was_leader": kill["victim"] == kill["leader"],
            "rss_idle": sorted(rss_idle.values()), "rss_jobs": sorted(rss_jobs.values()),
            "leader_rss_jobs": rss_jobs[kill["leader"]]}


def ours_failover(run_dir: str, profile: str, ks: list[int], trials: int,
                  timeout: float) -> dict:
    out = {"profile": profile, "settings": {**OUR_SETTINGS, **PROFILES[profile]},
           "trials": []}
    log(f"ours {profile}: a fresh 3-peer cluster per trial")
    for k in ks:
        for kind in ("leader", "follower"):
            for t in range(trials):
                try:
                    r = ours_trial(run_dir, profile, k, kind, timeout)
                except (TimeoutError, RuntimeError, OSError) as exc:
                    out.setdefault("errors", []).append(f"K={k} {kind} trial {t}: {exc!r}"[:500])
                    log(f"ours {profile} K={k} {kind} trial {t}: failed: {exc!r}")
                    continue
                r["trial"] = t
                log(f"ours {profile} K={k} {kind} kill: "
                    f"{json.dumps({x: y for x, y in r.items() if 'rss' not in x})}")
                out["trials"].append(r)
    return out


def ours_submission(run_dir: str, runs: int, jobs: int, clients_list: list[int],
                    warmup: int) -> dict:
    settings = {**OUR_SETTINGS, "jobmanager.slots": 64}
    base = _ours_base(run_dir, "submit")
    out = {"settings": settings, "runs": []}
    pids: list[int] = []
    try:
        with BenchCluster(3, settings, base=base) as c:
            pids = c.pids()
            wait_until(lambda: get(c.urls[0] + "/overview")["peers-alive"] == 3, 30, "3 peers")
            out["rss_idle"] = [rss_mb(p) for p in pids]
            tag = uuid.uuid4().hex[:8]

            for run in range(-1, runs):  # run -1: warm-up, not measured
                for clients in clients_list if run >= 0 else [max(clients_list)]:
                    async def post_one(session, i, run=run, clients=clients):
                        url = c.urls[i % 3]
                        for _ in range(100):
                            async with session.post(
                                    url + "/jobs", json=dict(TRIVIAL_JOB, name=f"b{i}"),
                                    headers={"X-Request-Id": f"{tag}-{run}-{clients}-{i}"}) as r:
                                body = await r.json(content_type=None)
                                if r.status == 202:
                                    return body["jobid"]
                                if r.status != 503:
                                    raise RuntimeError(f"HTTP {r.status}: {body}")
                            await asyncio.sleep(0.05)  # retry pacing after a 503 (no leader)
                        raise RuntimeError("503 for 5 s")

                    res = asyncio.run(closed_loop(post_one, jobs if run >= 0 else warmup,
                                                  clients))
                    ids = res.pop("ids")
                    rows = wait_ended(lambda: snapshot(c.urls[0]), ids, "our trivial jobs ended")
                    res.update(completion(rows, ids, res["t_start"]))
                    res["run"] = run
                    log(f"ours submission: {json.dumps(res)}")
                    if run >= 0:
                        out["runs"].append(res)
            out["rss_after"] = [rss_mb(p) for p in pids]
        _peer_pids_dead(pids)
    finally:
        if not leftovers():
            shutil.rmtree(base, ignore_errors=True)
    return out
