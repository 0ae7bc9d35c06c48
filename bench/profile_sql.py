"""Where a SQL gateway query's time goes: py-spy samples every peer process, every SQL
worker and this process's clients while C DB-API clients run a query on 3 real peers
(bench/olap.py's cluster), and each client times its two round trips (execute's answer,
the result's first page). The raw Spark Connect client's latency on the same servers is
the floor.

    .venv/bin/python bench/profile_sql.py [--clients 1,8] [--seconds 15] [--query select1]
                                          [--out bench/results/profile.json]

Reported per client count: queries/s, the client's round trips (p50 ms), the CPU each
process role used per query (peers, SQL workers, Spark's JVMs, the clients: from the
kernel's counts) and, in each Python role, where py-spy found Python holding the GIL: by
package and by function (self: the leaf frame; total: anywhere on the stack).
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, BenchCluster, get, median, report, wait_until  # noqa: E402
from bench.olap import (QUERIES, SETTINGS, drive, gateway_path, open_all,  # noqa: E402
                        raw_path)

RATE = 97   # samples a second (py-spy's default is 100; an odd rate avoids lockstep)
FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>[^:()]+)(?::\d+)?\)$")


def package(path: str) -> str:
    """The package of a frame's file: ours by folder (jm.cluster, rest, raft), installed
    ones by name (aiohttp, pysyncobj), the standard library's by module (stdlib.asyncio)."""
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if path.startswith(ROOT + "/"):
        parts = path[len(ROOT) + 1:].removesuffix(".py").split("/")
        return ".".join(parts[:2]) if parts[0] == "jm" and len(parts) > 2 else parts[0]
    lib = path.split("/lib/python3", 1)[-1].split("/")[1:]  # (after python3.X/)
    return "stdlib." + (lib[0].removesuffix(".py") if lib else os.path.basename(path))


def parse_raw(text: str) -> list[tuple[list[tuple[str, str]], int]]:
    """py-spy's raw (collapsed) output: each stack, root first, as (function, file)
    frames, with its count."""
    out = []
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = []
        for part in stack.split(";"):
            m = FRAME.match(part.strip())
            if m:
                frames.append((m["fn"], m["file"]))
        if frames:
            out.append((frames, int(count)))
    return out


def summarize(stacks: list, top: int = 15) -> dict:
    """Samples of one role: by package and by function, self (leaf) and total."""
    total = sum(n for _, n in stacks)
    self_pkg: collections.Counter = collections.Counter()
    self_fn: collections.Counter = collections.Counter()
    incl_fn: collections.Counter = collections.Counter()
    for frames, n in stacks:
        fn, path = frames[-1]
        self_pkg[package(path)] += n
        self_fn[f"{fn} ({package(path)})"] += n
        for key in {f"{f} ({package(p)})" for f, p in frames}:
            incl_fn[key] += n

    def share(c: collections.Counter) -> list:
        return [[k, n, round(100 * n / total, 1)] for k, n in c.most_common(top)] if total else []
    return {"samples": total, "self_by_package": share(self_pkg),
            "self_by_function": share(self_fn), "total_by_function": share(incl_fn)}


def processes(c: BenchCluster) -> dict[str, list[int]]:
    """The peer processes, their SQL workers and their Spark JVMs (by command line), and
    this one (the clients)."""
    import psutil
    roles: dict[str, list[int]] = {"peer": c.pids(), "sqlworker": [], "spark": []}
    for pid in c.pids():
        try:
            for child in psutil.Process(pid).children(recursive=True):
                line = " ".join(child.cmdline())
                if "jm.runtime.sqlworker" in line:
                    roles["sqlworker"].append(child.pid)
                elif os.path.basename(child.cmdline()[0]) == "java":
                    roles["spark"].append(child.pid)
        except (psutil.Error, IndexError):
            pass
    roles["client"] = [os.getpid()]
    return roles


def cpu_seconds(pids: dict[str, list[int]]) -> dict[str, float]:
    """CPU time (user + system) used so far by each role's processes."""
    import psutil
    out = {}
    for role, group in pids.items():
        total = 0.0
        for pid in group:
            try:
                t = psutil.Process(pid).cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
        out[role] = total
    return out


def record(pids: dict[str, list[int]], seconds: Optional[float], folder: str) -> list:
    """One py-spy per Python process for `seconds` (None: until SIGINT, `stop`), sampling
    only the threads that hold the GIL (Python at work, not threads waiting;
    non-blocking: nothing is paused)."""
    procs = []
    for role, group in pids.items():
        if role == "spark":
            continue
        for pid in group:
            path = os.path.join(folder, f"{role}-{pid}.txt")
            procs.append((role, path, subprocess.Popen(
                [os.path.join(os.path.dirname(sys.executable), "py-spy"), "record",
                 "--pid", str(pid), "--rate", str(RATE),
                 *(["--duration", str(int(seconds))] if seconds else []),
                 "--format", "raw", "--nonblocking", "--gil", "--full-filenames",
                 "--output", path],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
    return procs


def stop(spies: list, timeout: float = 60) -> dict[str, list]:
    """The py-spies stopped (SIGINT: each writes its samples) and their stacks by role."""
    stacks: dict[str, list] = collections.defaultdict(list)
    for _, _, proc in spies:
        proc.send_signal(signal.SIGINT)
    for role, path, proc in spies:
        proc.wait(timeout=timeout)
        if os.path.exists(path):
            with open(path) as f:
                stacks[role].extend(parse_raw(f.read()))
    return stacks


def timed_gateway(urls: list[str], q: str, opened: list, phases: dict):
    """bench/olap.py's DB-API clients, their execute and their fetchall timed apart."""
    lock = threading.Lock()
    make, _ = gateway_path(urls, q, opened)

    def run(cur) -> None:
        t0 = time.perf_counter()
        cur.execute(q)
        t1 = time.perf_counter()
        cur.fetchall()
        t2 = time.perf_counter()
        with lock:
            phases["execute"].append(t1 - t0)
            phases["fetchall"].append(t2 - t1)
    return make, run


def one_count(c: BenchCluster, remotes: list[str], q: str, n: int, seconds: float) -> dict:
    opened: list = []
    make, run = raw_path(remotes, q, opened)
    states = open_all(make, n)
    drive(states, 2.0, run)
    pids = processes(c)
    before = cpu_seconds(pids)
    raw = drive(states, seconds / 2, run)
    used = cpu_seconds(pids)
    raw["cpu_ms_per_query"] = {role: round(1000 * (used[role] - before[role]) / n_q, 1)
                               for role in used for n_q in [max(1, raw["queries"])]}
    for close in opened:
        close()
    opened = []
    phases: dict = {"execute": [], "fetchall": []}
    make, run = timed_gateway(c.urls, q, opened, phases)
    states = open_all(make, n)
    held = collections.Counter(cur.connection._session.info()["node"] for cur in states)
    drive(states, 2.0, run)
    phases["execute"].clear()
    phases["fetchall"].clear()
    with tempfile.TemporaryDirectory(prefix="jm-profile-") as folder:
        pids = processes(c)
        spies = record(pids, seconds, folder)
        before = cpu_seconds(pids)
        gw = drive(states, seconds, run)
        used = cpu_seconds(pids)
        roles: dict[str, list] = collections.defaultdict(list)
        for role, path, proc in spies:
            proc.wait(timeout=seconds + 60)
            if os.path.exists(path):
                with open(path) as f:
                    roles[role].extend(parse_raw(f.read()))
    for close in opened:
        close()
    return {"clients": n, "sessions_per_peer": sorted(held.values(), reverse=True),
            "raw": {k: raw[k] for k in ("qps", "p50_ms", "p99_ms", "cpu_ms_per_query")},
            "gateway": {k: gw[k] for k in ("qps", "p50_ms", "p99_ms", "failures")},
            "round_trips_p50_ms": {k: round(1000 * median(v), 1) for k, v in phases.items()
                                   if v},
            "cpu_ms_per_query": {role: round(1000 * (used[role] - before[role]) / n_q, 1)
                                 for role in used for n_q in [max(1, gw["queries"])]},
            "cores_busy": {role: round((used[role] - before[role]) / seconds, 2)
                           for role in used},
            "cpu": {role: summarize(stacks) for role, stacks in sorted(roles.items())}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", default="1,8")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--query", choices=tuple(QUERIES), default="select1")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    out: dict = {"query": QUERIES[a.query], "seconds": a.seconds, "rate": RATE, "counts": []}
    with BenchCluster(3, SETTINGS) as c:
        for url in c.urls:
            wait_until(lambda u=url: get(u + "/healthz").get("spark-ready"), 300,
                       f"{url} Spark ready")
        remotes = [get(u + "/healthz")["spark-remote"] + "/;token=bench-olap" for u in c.urls]
        for n in (int(x) for x in a.clients.split(",")):
            out["counts"].append(one_count(c, remotes, QUERIES[a.query], n, a.seconds))
    report(out, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
