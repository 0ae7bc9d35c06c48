"""Shared pieces of the benchmarks: a real multi-peer cluster started with
bin/jobmanager.sh on free loopback ports, stopped (by PID) on every exit path."""
from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import urllib.request

from jm.local.localcluster import local_lines, wait_until, write_conf  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def get(url: str, timeout: float = 5) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def request(method: str, url: str, body: dict | None = None, timeout: float = 30,
            headers: dict | None = None) -> dict:
    """One JSON request to a peer's REST API; the JSON answer ({} for an empty one)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read() or b"{}")


def post(url: str, body: dict | None) -> dict:
    return request("POST", url, body, timeout=10)


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100 * (len(s) - 1)))))
    return s[k]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def cpu_ticks() -> list[int]:
    """The machine's CPU time so far (/proc/stat, clock ticks): user, nice, system,
    idle, iowait, irq, softirq, steal."""
    with open("/proc/stat") as f:
        return [int(x) for x in f.readline().split()[1:9]]


def machine_cores(before: list[int], after: list[int], seconds: float) -> dict:
    """How the machine's CPUs spent `seconds` between two cpu_ticks(), in cores: busy
    (ours), idle (waiting with nothing to run) and stolen (the hypervisor ran something
    else: on a shared VM it varies from run to run and takes the CPU a benchmark counts
    on; quote it with the figures)."""
    d = [b - a for a, b in zip(before, after)]
    hz = os.sysconf("SC_CLK_TCK") * max(seconds, 1e-9)
    return {"busy": round((d[0] + d[1] + d[2] + d[5] + d[6]) / hz, 2),
            "idle": round((d[3] + d[4]) / hz, 2), "stolen": round(d[7] / hz, 2)}


def thread_sched(pids: list[int]) -> dict:
    """The processes' threads so far, the event loop's (the main thread) apart from the
    others (Raft's tick and fsync threads, executors): CPU seconds run and seconds spent
    runnable but waiting for a CPU (/proc/<pid>/task/<tid>/schedstat: what the scheduler
    made them wait, which a handoff between threads pays on a busy machine)."""
    out = {"loop": [0.0, 0.0], "threads": [0.0, 0.0]}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    run_ns, wait_ns = (int(x) for x in f.read().split()[:2])
            except (OSError, ValueError):
                continue
            row = out["loop" if tid == str(pid) else "threads"]
            row[0] += run_ns / 1e9
            row[1] += wait_ns / 1e9
    return out


def sched_rates(before: dict, after: dict, seconds: float) -> dict:
    """Between two thread_sched(): {role: {"running": cores, "waiting": cores}}."""
    s = max(seconds, 1e-9)
    return {role: {"running": round((after[role][0] - before[role][0]) / s, 2),
                   "waiting": round((after[role][1] - before[role][1]) / s, 2)}
            for role in after}


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


class BenchCluster:
    def __init__(self, n: int, settings: dict, base: str | None = None,
                 root: str = ROOT) -> None:
        """`root`: the checkout whose bin/ starts the peers and whose code they run (from
        its directory: `python -m` looks in the working directory first)."""
        self.root = root
        self._own_base = base is None  # (removed at the end unless JM_BENCH_KEEP is set)
        self.base = base or tempfile.mkdtemp(prefix="jm-bench-")
        self.lines = local_lines(n)
        self.urls = ["http://127.0.0.1:" + line.split(":")[1] for line in self.lines]
        self.conf_dir = write_conf(self.base, self.lines,
                                   {"jobmanager.log.level": "WARNING", **settings})
        self.env = dict(os.environ, JM_CONF_DIR=self.conf_dir)

    def _bin(self, *args: str) -> None:
        subprocess.run([os.path.join(self.root, "bin", args[0]), *args[1:]], env=self.env,
                       cwd=self.root, check=True, capture_output=True, timeout=120)

    def pids(self) -> list[int]:
        run = os.path.join(self.base, "run")
        out = []
        for name in os.listdir(run) if os.path.isdir(run) else []:
            try:
                out.append(int(open(os.path.join(run, name)).read()))
            except ValueError:
                pass
        return out

    def start(self, timeout: float = 60) -> None:
        self._bin("start-cluster.sh")
        for url in self.urls:
            wait_until(lambda u=url: get(u + "/healthz").get("ok"), timeout, f"{url} healthy")

    def stop(self) -> None:
        pids = self.pids()
        try:
            self._bin("stop-cluster.sh")
        except Exception:
            pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def __enter__(self) -> "BenchCluster":
        # SIGTERM (and SIGINT, which a background job ignores) end the run through the
        # normal exit path, so every peer, zygote and JVM is stopped
        signal.signal(signal.SIGTERM, _interrupt)
        signal.signal(signal.SIGINT, _interrupt)
        try:
            self.start()
        except BaseException:
            self.__exit__()  # (a cluster that did not start leaves no directory either)
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
        if self._own_base and not os.environ.get("JM_BENCH_KEEP"):
            shutil.rmtree(self.base, ignore_errors=True)  # (a run's data: gigabytes a day)


def report(out: dict, path: "str | None" = None) -> None:
    """Print a bench's figures as JSON, and write them to `path` too (--out)."""
    text = json.dumps(out, indent=1)
    print(text)
    if path:
        with open(path, "w") as f:
            f.write(text + "\n")
