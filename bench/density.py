"""Density benchmark (issue 40): N small streaming pipelines of T tenants on 3 real peers,
at each engine share level (`peer`, `tenant`, `job`) and in classic mode, one cluster
after the other in one run:

* memory of everything the cluster runs (peers, zygotes, job processes, SQL workers,
  JVMs), counted by PSS (forked processes share pages: RSS overcounts), idle and with
  the pipelines, and the project's own share (every process but the JVMs) per pipeline;
* CPU at rest (all those processes, cores) while the pipelines are fed;
* the time until all N pipelines wrote their first record;
* record latency: the sink file's time minus the time the record was written, p50/p99;
* the blast radius: one connect-mode job of tenant t0 that runs its engine out of memory
  (collect_list of 200,000 strings of 100 KB): how many pipelines of its own tenant and of
  the others restart.

    .venv/bin/python bench/density.py                          # 12 pipelines, 3 tenants
    .venv/bin/python bench/density.py --pipelines 30 --tenants 5 --modes tenant,peer

Each pipeline is fed one record every --interval seconds (staggered); the rest is
measured --warm seconds after all of them wrote. Results are written to
bench/results/issue-40-density.json (--out).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.common import ROOT, BenchCluster, median, pct, wait_until  # noqa: E402
from jm.policy.jobs.vocab import TERMINAL  # noqa: E402

TOKEN = "density-root"
BENCH = os.path.dirname(os.path.abspath(__file__)) + "/"  # (a directory: ends with /)
MODES = {  # mode -> (share level, spark-mode of the pipelines, placement)
    "peer": ("peer", "connect", "spread"), "tenant": ("tenant", "connect", "spread"),
    # a tenant's pipelines together: its engines on as few peers as its slots allow
    "tenant-packed": ("tenant", "connect", "by-tenant"),
    "job": ("job", "connect", "spread"), "classic": ("peer", "classic", "spread"),
}
TICK = os.sysconf("SC_CLK_TCK")


def call(method: str, url: str, body=None, token: str = TOKEN, timeout: float = 30):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


# ---- processes ------------------------------------------------------------------------
def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as f:
        text = f.read()
    return text[text.rindex(")") + 2:].split()


def descendants(roots: list[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                children.setdefault(int(_stat(int(name))[1]), []).append(int(name))
            except (OSError, IndexError, ValueError):
                pass
    out, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _is_jvm(pid: int) -> bool:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe")) == "java"
    except OSError:
        return False


def pss_mb(pids: list[int]) -> tuple[float, float]:
    """(PSS of all, PSS of all but the JVMs) in MB."""
    total = own = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                kb = next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration, ValueError):
            continue
        total += kb
        if not _is_jvm(pid):
            own += kb
    return total / 1024, own / 1024


def cpu_seconds(pids: list[int]) -> float:
    out = 0.0
    for pid in pids:
        try:
            f = _stat(pid)
            out += (int(f[11]) + int(f[12])) / TICK
        except (OSError, IndexError, ValueError):
            pass
    return out


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def roles(roots: list[int]) -> dict[int, str]:
    """pid -> what it is: peer, zygote, job process, engine (a JVM), SQL worker, other
    (a Python UDF worker, a Livy process, a classic job's driver's children)."""
    pids = descendants(roots)
    zygotes = {p for p in pids if "jm.runtime.zygote" in _cmdline(p)
               and _parent(p) in roots}
    out = {}
    for pid in pids:
        if pid in roots:
            out[pid] = "peer"
        elif pid in zygotes:
            out[pid] = "zygote"
        elif _is_jvm(pid):
            out[pid] = "engine" if "SparkConnectServer" in _cmdline(pid) else "driver"
        elif _parent(pid) in zygotes:
            out[pid] = "job process"
        elif "sqlworker" in _cmdline(pid):
            out[pid] = "sql worker"
        else:
            out[pid] = "other"
    return out


def _parent(pid: int) -> int:
    try:
        return int(_stat(pid)[1])
    except (OSError, IndexError, ValueError):
        return 0


def cpu_cores(roots: list[int], seconds: float) -> tuple[float, dict]:
    """Cores the cluster's processes used over `seconds`, in all and by role (processes
    that come and go in between are not counted: at rest there are none)."""
    who = roles(roots)
    before = {pid: cpu_seconds([pid]) for pid in who}
    t0 = time.monotonic()
    time.sleep(seconds)  # the measurement window
    took = time.monotonic() - t0
    by: dict[str, float] = {}
    for pid, role in who.items():
        by[role] = by.get(role, 0.0) + (cpu_seconds([pid]) - before[pid]) / took
    return sum(by.values()), {r: round(v, 3) for r, v in sorted(by.items())}


# ---- feeding and latency --------------------------------------------------------------
class Feeder(threading.Thread):
    """One record every `interval` s per pipeline, staggered over the interval; each
    record file is written whole, then renamed into the source directory."""

    def __init__(self, inputs: list[str], interval: float) -> None:
        super().__init__(daemon=True)
        self.inputs, self.interval = inputs, interval
        self.stop_event = threading.Event()
        self.n = 0

    def run(self) -> None:
        step = self.interval / max(1, len(self.inputs))
        while not self.stop_event.is_set():
            for i, d in enumerate(self.inputs):
                if self.stop_event.wait(step):
                    return
                tmp = os.path.join(d, f".r{self.n}-{i}.tmp")
                with open(tmp, "w") as f:
                    f.write(json.dumps({"t": time.time(), "v": self.n}) + "\n")
                os.rename(tmp, os.path.join(d, f"r{self.n}-{i}.json"))
            self.n += 1


def sink_rows(out_dir: str) -> list[tuple[float, float]]:
    """(record time, sink file time) of every row a pipeline wrote."""
    rows = []
    try:
        names = os.listdir(out_dir)
    except OSError:
        return rows
    for name in names:
        if not name.startswith("part-"):
            continue
        path = os.path.join(out_dir, name)
        try:
            mtime = os.stat(path).st_mtime
            with open(path) as f:
                for line in f:
                    try:
                        rows.append((float(json.loads(line)["t"]), mtime))
                    except (ValueError, KeyError, TypeError):
                        pass
        except OSError:
            pass
    return rows


# ---- one mode -------------------------------------------------------------------------
def run_mode(mode: str, args) -> dict:
    level, spark_mode, placement = MODES[mode]
    settings = {"rest.auth.token": TOKEN, "spark.connect.share-level": level,
                "jobmanager.placement": placement,
                "spark.master": args.master, "spark.driver.memory": args.engine_memory,
                "jobmanager.slots": args.pipelines + 4, "rebalance.strategy": "none",
                "spark.connect.engine.max-per-peer": max(8, args.pipelines + 2),
                "jobmanager.stop.drain-deadline": 0}
    with BenchCluster(3, settings) as c:
        base, url = c.base, c.urls[0]
        roots = c.pids()
        if level == "peer":
            wait_until(lambda: all(call("GET", u + "/healthz")[1].get("spark-ready")
                                   for u in c.urls), 300, "every peer's engine ready")
        idle_pss, idle_own = pss_mb(descendants(roots))
        idle_cpu, idle_by = cpu_cores(roots, args.rest / 3)
        tokens = {}
        for t in range(args.tenants):
            s, b = call("POST", url + "/tokens", {"name": f"t{t}", "role": "submit",
                                                  "tenant": f"t{t}"})
            assert s == 201, b
            tokens[f"t{t}"] = b["token"]
        jobs, inputs, outputs = {}, [], []
        t_submit = time.time()
        for i in range(args.pipelines):
            tenant = f"t{i % args.tenants}"
            inp, out = (os.path.join(base, "data", f"p{i}", d) for d in ("in", "out"))
            os.makedirs(inp)
            inputs.append(inp)
            outputs.append(out)
            s, b = call("POST", c.urls[i % 3] + "/jobs", {
                "name": f"pipeline-{i}", "entry": "density_job:pipeline", "pyfiles": [BENCH],
                "job-type": "streaming", "spark-mode": spark_mode,
                "args": {"input": inp, "output": out},
                "restart-strategy": {"type": "fixed-delay", "attempts": 1000,
                                     "delay": "2 s"}}, tokens[tenant])
            assert s == 202, b
            jobs[b["jobid"]] = tenant
        feeder = Feeder(inputs, args.interval)
        feeder.start()
        try:
            wait_until(lambda: all(sink_rows(o) for o in outputs), args.timeout,
                       "every pipeline wrote a record")
            all_writing = time.time() - t_submit
            # the engines' JIT settles (a pipeline runs for days): the cores of each
            # minute meanwhile show how far (C2 compiles for minutes after a JVM's start)
            warming, left = [], args.warm
            while left > 0:
                window = min(60.0, left)
                warming.append(round(cpu_cores(roots, window)[0], 3))
                left -= window
            rest_from = time.time()
            cores, cores_by = cpu_cores(roots, args.rest)
            pss, own = pss_mb(descendants(roots))
            lat = [m - t for o in outputs for t, m in sink_rows(o) if t >= rest_from]
            blast = blast_radius(c, url, jobs, tokens, spark_mode, args) if args.oom else None
        finally:
            feeder.stop_event.set()
        n = args.pipelines
        return {"mode": mode, "share-level": level, "spark-mode": spark_mode,
                "pipelines": n, "tenants": args.tenants, "interval_s": args.interval,
                "warm_s": args.warm, "rest_s": args.rest, "cores_while_warming": warming,
                "idle_pss_mb": round(idle_pss), "idle_cores": round(idle_cpu, 3),
                "idle_cores_by_role": idle_by, "cores_at_rest_by_role": cores_by,
                "pss_mb": round(pss), "pss_per_pipeline_mb": round((pss - idle_pss) / n, 1),
                "own_pss_per_pipeline_mb": round((own - idle_own) / n, 1),
                "cores_at_rest": round(cores, 3), "time_to_all_writing_s": round(all_writing, 1),
                "records": len(lat),
                "latency_p50_s": round(median(lat), 2) if lat else None,
                "latency_p99_s": round(pct(lat, 99), 2) if lat else None,
                "blast": blast}


def _restarts(url: str, jobs: dict) -> dict:
    """job -> (restarts, state)."""
    out = {}
    for jid in jobs:
        s, b = call("GET", url + f"/jobs/{jid}")
        out[jid] = (b.get("restarts", 0), b.get("state")) if s == 200 else (None, None)
    return out


def blast_radius(c, url: str, jobs: dict, tokens: dict, spark_mode: str, args) -> dict:
    """One job of tenant t0 runs its engine out of memory: which pipelines restarted."""
    before = _restarts(url, jobs)
    s, b = call("POST", url + "/jobs", {
        "name": "oom", "entry": "density_job:oom", "pyfiles": [BENCH],
        "spark-mode": spark_mode, "restart-strategy": {"type": "none"}}, tokens["t0"])
    assert s == 202, b
    oom = b["jobid"]

    def ended():
        s, b = call("GET", url + f"/jobs/{oom}")
        return b if b.get("state") in TERMINAL else None
    def placed():
        s, b = call("GET", url + f"/jobs/{oom}")
        return b.get("node") or (b if b.get("state") in ("FAILED", "FINISHED") else None)
    node = wait_until(placed, 120, "the out-of-memory job placed")  # (its engine's other
    # holders: what it can take down)
    node = node if isinstance(node, str) else None
    sharing = None
    for u in c.urls:
        s, h = call("GET", u + "/healthz")
        if node and s == 200 and h.get("node") == node:
            rows = {e["engine"]: e for e in h.get("engines") or ()}
            row = rows.get("tenant-t0") or rows.get("peer")
            sharing = row["holders"] - 1 if row else None
    try:
        end = wait_until(ended, args.oom_timeout, "the out-of-memory job ended")
    except TimeoutError:  # (a classic driver may thrash for long before it dies)
        call("PATCH", url + f"/jobs/{oom}")
        end = {"state": f"not ended within {args.oom_timeout:.0f} s (cancelled)"}
    s, ex = call("GET", url + f"/jobs/{oom}/exceptions")
    # the pipelines its engine took down restart; give them time to (their restart delay
    # is 2 s, an engine's restart ~10 s), then count
    deadline = time.monotonic() + args.settle
    while time.monotonic() < deadline:
        time.sleep(2)  # a settling window, measured as such
    after = _restarts(url, jobs)
    # hit: restarted, or still on its way (killed, its attempt ending or starting again)
    hit = [j for j in jobs if (after[j][0] or 0) > (before[j][0] or 0)
           or after[j][1] != "RUNNING"]
    same = [j for j in jobs if jobs[j] == "t0"]
    return {"oom_job_state": end["state"], "oom_job_node": node,
            "holders_sharing_its_engine": sharing,
            "oom_exception": ((ex or {}).get("root-exception") or "")[:300],
            "restarted_same_tenant": sum(1 for j in hit if jobs[j] == "t0"),
            "same_tenant_pipelines": len(same),
            "restarted_other_tenants": sum(1 for j in hit if jobs[j] != "t0"),
            "other_tenant_pipelines": len(jobs) - len(same)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pipelines", type=int, default=12)
    ap.add_argument("--tenants", type=int, default=3)
    ap.add_argument("--modes", default="peer,tenant,tenant-packed,job,classic")
    ap.add_argument("--interval", type=float, default=60.0,
                    help="seconds between two records of one pipeline")
    ap.add_argument("--warm", type=float, default=120.0,
                    help="seconds after all pipelines write before the rest is measured "
                         "(the engines' JIT compilers are busy for the first minutes)")
    ap.add_argument("--rest", type=float, default=60.0, help="the measured window (s)")
    ap.add_argument("--master", default="local[1]")
    ap.add_argument("--engine-memory", default="1g")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--settle", type=float, default=90.0,
                    help="seconds after the OOM job's end before restarts are counted")
    ap.add_argument("--no-oom", dest="oom", action="store_false")
    ap.add_argument("--oom-timeout", type=float, default=300.0,
                    help="seconds the out-of-memory job may take before it is cancelled")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results",
                                                  "issue-40-density.json"))
    args = ap.parse_args()
    runs = []
    for mode in args.modes.split(","):
        if mode not in MODES:
            print(f"density: unknown mode {mode!r} (one of {', '.join(MODES)})",
                  file=sys.stderr)
            return 2
    for mode in args.modes.split(","):
        r = run_mode(mode, args)
        print(json.dumps(r), flush=True)
        runs.append(r)
        with open(args.out, "w") as f:  # after each mode: a later one may fail
            json.dump({"args": vars(args), "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
