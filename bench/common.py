"""Shared pieces of the benchmarks: a real multi-peer cluster started with
bin/jobmanager.sh on free loopback ports, stopped (by PID) on every exit path."""
from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_ports(n: int) -> list[int]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def get(url: str, timeout: float = 5) -> dict:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


def wait_until(fn, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = fn()
            if value:
                return value
        except Exception:
            pass
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {timeout} s")


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100 * (len(s) - 1)))))
    return s[k]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


class BenchCluster:
    def __init__(self, n: int, settings: dict, base: str | None = None) -> None:
        self.base = base or tempfile.mkdtemp(prefix="jm-bench-")
        self.conf_dir = os.path.join(self.base, "conf")
        os.makedirs(self.conf_dir, exist_ok=True)
        ports = free_ports(2 * n)
        self.lines = [f"127.0.0.1:{ports[2 * i]}:{ports[2 * i + 1]}" for i in range(n)]
        self.urls = [f"http://127.0.0.1:{ports[2 * i]}" for i in range(n)]
        with open(os.path.join(self.conf_dir, "masters"), "w") as f:
            f.write("\n".join(self.lines) + "\n")
        values = {"jobmanager.data-dir": os.path.join(self.base, "data"),
                  "env.log.dir": os.path.join(self.base, "log"),
                  "env.pid.dir": os.path.join(self.base, "run"),
                  "high-availability.storageDir": os.path.join(self.base, "ha"),
                  "jobmanager.log.level": "WARNING"}
        values.update(settings)
        with open(os.path.join(self.conf_dir, "config.yaml"), "w") as f:
            yaml.safe_dump(values, f)
        self.env = dict(os.environ, JM_CONF_DIR=self.conf_dir)

    def _bin(self, *args: str) -> None:
        subprocess.run([os.path.join(ROOT, "bin", args[0]), *args[1:]], env=self.env,
                       check=True, capture_output=True, timeout=120)

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
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
