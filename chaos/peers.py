"""Peer processes of one cluster, shared by the chaos harness (chaos/harness.py) and the
tests (tests/e2e/procs.py, tests/e2e/powercut.py, tests/e2e/test_hosts.py; tests/helpers.py
builds its `http` on `request`): one HTTP call, process liveness by PID, and
`PeerProcesses`: N peers of a conf dir started with bin/ scripts, waited for, their leader
found, one killed, frozen, thawed or restarted by PID, all stopped by PID.

The standard library and jm.local only (chaos/ is shipped without tests/)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from typing import Any, Callable, Optional

from jm.local.localcluster import wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse_body(payload: bytes) -> Any:
    """JSON if it parses, else the text; None when empty."""
    if not payload:
        return None
    try:
        return json.loads(payload)
    except ValueError:
        return payload.decode(errors="replace")


def request(method: str, url: str, body: Any = None, headers: Optional[dict] = None,
            raw: Optional[bytes] = None, timeout: float = 10.0) -> tuple[int, Any, Any]:
    """One HTTP request: a JSON `body` or `raw` bytes -> (status, parsed body, headers).
    An HTTP error status is an answer, not an exception; no connection is an OSError."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    if data is not None and raw is None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, parse_body(resp.read()), resp.headers
    except urllib.error.HTTPError as exc:
        return exc.code, parse_body(exc.read()), exc.headers


def running(pid: int) -> bool:
    """The process runs (a zombie has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[-1][:1] != "Z"
    except FileNotFoundError:
        return False


def wait_gone(pids, timeout: float) -> list[int]:
    """Poll until none of `pids` runs (or the deadline); return those still running."""
    try:
        wait_until(lambda: not [p for p in pids if running(p)], timeout, "gone", 0.05)
    except TimeoutError:
        pass
    return [p for p in pids if running(p)]


def send(pids, sig: int) -> None:
    """`sig` to each of `pids` that still exists."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def descendants(pid: int) -> list[int]:
    """The pids of every descendant of `pid` (its zygote, job processes), from /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    ppid = int(f.read().rsplit(") ", 1)[-1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


class PeerProcesses:
    """The peers of conf/masters (`lines`: "host:rest-port:raft-port") of `conf_dir`,
    started with bin/jobmanager.sh or bin/start-cluster.sh. Every pid seen is noted and
    stopped by PID at the end, also when a script failed or hung.

    Subclasses choose how requests and waits are made (`call`, `wait`), where a peer runs
    (`exec_prefix`: a network namespace) and how it starts (`start_peer`)."""

    script_timeout = 120.0

    def __init__(self, base: str, lines: list[str], conf_dir: str,
                 env: Optional[dict] = None, run_dir: Optional[str] = None) -> None:
        self.base = base
        self.lines = list(lines)
        self.conf_dir = conf_dir
        self.env = dict(os.environ, JM_CONF_DIR=conf_dir, **(env or {}))
        self.run_dir = run_dir or os.path.join(base, "run")  # env.pid.dir
        self.urls = [f"http://{ln.rsplit(':', 2)[0]}:{ln.split(':')[-2]}" for ln in self.lines]
        self.nodes = [f"{ln.rsplit(':', 2)[0]}:{ln.rsplit(':', 1)[1]}" for ln in self.lines]
        self.live: dict[int, int] = {}   # peer index -> pid of the running peer
        self.all_pids: set[int] = set()  # every peer pid seen: stopped by PID at the end

    # ---- how requests and waits are made (subclasses: sessions, tokens, error kinds) ----
    def call(self, method: str, url: str, body: Any = None,
             timeout: float = 10.0) -> tuple[int, Any]:
        return request(method, url, body, timeout=timeout)[:2]

    def wait(self, fn: Callable[[], Any], timeout: float, what: str,
             interval: float = 0.1) -> Any:
        return wait_until(fn, timeout, what, interval)

    def exec_prefix(self, i: int) -> list[str]:
        """The command that runs peer i's start script where it lives ([]: here)."""
        return []

    # ---- scripts and pid files -----------------------------------------------------
    def run(self, *args: str, env: Optional[dict] = None,
            prefix: Optional[list[str]] = None) -> subprocess.CompletedProcess:
        """bin/<args[0]> with the cluster's environment (plus `env`)."""
        return subprocess.run([*(prefix or []), os.path.join(ROOT, "bin", args[0]), *args[1:]],
                              env=dict(self.env, **(env or {})), capture_output=True,
                              text=True, timeout=self.script_timeout)

    def pid_file(self, i: int) -> str:
        host, rest, _ = self.lines[i].split(":")
        names = [n for n in os.listdir(self.run_dir) if n.endswith(f"-{host}_{rest}.pid")]
        if not names:
            raise FileNotFoundError(f"no pid file of {self.lines[i]} in {self.run_dir}")
        return os.path.join(self.run_dir, names[0])

    def peer_pid(self, i: int) -> int:
        """Peer i's pid from its pid file (noted for the stop)."""
        with open(self.pid_file(i)) as f:
            pid = int(f.read().strip())
        self.all_pids.add(pid)
        return pid

    def pid_file_pids(self) -> list[int]:
        """The pids of every pid file of the run folder (noted for the stop)."""
        out = []
        for name in os.listdir(self.run_dir) if os.path.isdir(self.run_dir) else []:
            if name.endswith(".pid"):
                try:
                    with open(os.path.join(self.run_dir, name)) as f:
                        out.append(int(f.read().strip()))
                except (OSError, ValueError):
                    pass
        self.all_pids.update(out)
        return out

    def _check(self, r: subprocess.CompletedProcess, what: str) -> None:
        assert r.returncode == 0, f"{what} failed: {r.stderr.strip()}"

    # ---- start, wait ---------------------------------------------------------------
    def start_peer(self, i: int) -> int:
        """Peer i with bin/jobmanager.sh start (where exec_prefix says); -> its pid."""
        r = self.run("jobmanager.sh", "start", self.lines[i], prefix=self.exec_prefix(i))
        self._check(r, f"jobmanager.sh start {self.lines[i]}")
        self.live[i] = self.peer_pid(i)
        return self.live[i]

    def start_cluster(self, *args: str) -> None:
        """Every peer of conf/masters with bin/start-cluster.sh."""
        r = self.run("start-cluster.sh", *args)
        self._check(r, "start-cluster.sh")
        for i in range(len(self.lines)):
            self.live[i] = self.peer_pid(i)

    def healthz(self, i: int, key: str = "ok", timeout: Optional[float] = None) -> Any:
        """Peer i's /healthz[key] (timeout None: the call's own default)."""
        kw = {} if timeout is None else {"timeout": timeout}
        return self.call("GET", self.urls[i] + "/healthz", **kw)[1].get(key)

    def wait_healthy(self, i: int, timeout: float = 60.0, interval: float = 0.1,
                     call_timeout: Optional[float] = None) -> None:
        self.wait(lambda: self.healthz(i, "ok", call_timeout), timeout,
                  f"{self.urls[i]} healthy", interval)

    # ---- who is who ----------------------------------------------------------------
    def index_of(self, node: str) -> Optional[int]:
        return self.nodes.index(node) if node in self.nodes else None

    def alive_url(self, exclude: Optional[int] = None) -> str:
        """A peer started here that answers /healthz."""
        for i, url in enumerate(self.urls):
            if i != exclude and i in self.live:
                try:
                    if self.call("GET", url + "/healthz", timeout=1)[0] == 200:
                        return url
                except OSError:
                    continue
        raise RuntimeError("no healthy peer")

    def leader_index(self) -> Optional[int]:
        try:
            leader = self.call("GET", self.alive_url() + "/overview")[1]["leader"]
        except (OSError, RuntimeError, KeyError, TypeError):
            return None
        return self.index_of(leader)

    # ---- faults by PID -------------------------------------------------------------
    def kill(self, i: int, sig: int = signal.SIGKILL) -> int:
        """`sig` (SIGKILL) to peer i; it is no longer live. -> its pid."""
        pid = self.live.pop(i)
        send([pid], sig)
        return pid

    def freeze(self, i: int) -> int:
        send([self.live[i]], signal.SIGSTOP)
        return self.live[i]

    def thaw(self, i: int) -> int:
        send([self.live[i]], signal.SIGCONT)
        return self.live[i]

    def restart(self, i: int, timeout: float = 60.0) -> int:
        """Peer i killed (if live), its end awaited, started again and healthy."""
        if i in self.live:
            pid = self.kill(i)
            left = wait_gone([pid], 30)
            assert not left, f"peer {self.lines[i]} ({pid}) still runs after SIGKILL"
        pid = self.start_peer(i)
        self.wait_healthy(i, timeout)
        return pid

    # ---- the end -------------------------------------------------------------------
    def kill_all(self) -> None:
        """SIGKILL to every peer seen (pid files included): nothing is left behind."""
        self.pid_file_pids()
        send(list(self.all_pids), signal.SIGKILL)
        self.live.clear()

    def terminate_all(self, grace: float = 15.0) -> None:
        """SIGCONT and SIGTERM to every peer seen, SIGKILL to those still running after
        `grace` seconds."""
        pids = list(self.all_pids)
        for sig in (signal.SIGCONT, signal.SIGTERM):
            send(pids, sig)
        send(wait_gone(pids, grace), signal.SIGKILL)
        self.live.clear()
