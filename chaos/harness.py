"""Chaos harness: N real peers started with bin/jobmanager.sh, each in its own network
namespace (or all on 127.0.0.1 when partitions are not asked for), probe jobs, a
submission load, and faults for a bounded time: SIGKILL of a random peer or of the
leader, SIGSTOP/SIGCONT pauses longer than the lease, restarts of killed peers, and
partitions of one peer from the others. Every process it starts is stopped by PID."""
from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Optional

from chaos.netns import TestNet
from jm.local.localcluster import local_lines, wait_until, write_conf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_TOKENS: dict = {}  # "host:port" -> the rest.auth.token of the cluster there


def auth_headers(url: str) -> dict:
    """The bearer credential the peer at `url` wants (clusters on test hosts have one)."""
    from urllib.parse import urlsplit
    token = _TOKENS.get(urlsplit(url).netloc)
    return {"Authorization": f"Bearer {token}"} if token else {}


def call(method: str, url: str, body=None, headers=None, timeout: float = 3.0):
    data = json.dumps(body).encode() if body is not None else None
    headers = {**auth_headers(url), **(headers or {})}
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read() or b"null")
        except ValueError:
            return exc.code, None


@dataclass
class Scenario:
    peers: int = 3
    jobs: int = 12
    duration: float = 90.0
    faults: tuple = ("kill", "kill-leader", "pause", "partition")
    fault_every: float = 12.0
    seed: int = 1
    load_clients: int = 3
    load_rate: float = 5.0          # submissions/s per client during the faults
    settle: float = 20.0            # max wait after healing for every job to run again
    streaming: int = 0              # streaming example jobs (real Spark on every peer)
    min_faults: int = 0             # go on past `duration` until this many faults were made
    hosts: bool = False             # peers on namespace hosts, started over ssh (chaos.hosts)
    settings: dict = field(default_factory=dict)


class ChaosCluster:
    def __init__(self, sc: Scenario, base: Optional[str] = None) -> None:
        self.sc = sc
        self.base = base or tempfile.mkdtemp(prefix="jm-chaos-")
        self.hostbed = None  # chaos.hosts.Hosts: namespaces with sshd, peers over ssh
        extra: dict = {}
        self.clocks: list = []  # chaos.clock.ClockFault per host (the clock fault)
        if sc.hosts:
            from chaos.hosts import Hosts
            host_env = None
            if "clock" in sc.faults:  # every host's processes follow their own clock files
                from chaos.clock import ClockFault
                self.clocks = [ClockFault(os.path.join(self.base, "clock", str(i)))
                               for i in range(sc.peers)]
                from chaos.clock import CHILDREN_SEE
                host_env = [{"JM_CLOCK_DIR": f.directory, "PYTHONPATH": f.directory,
                             **CHILDREN_SEE} for f in self.clocks]
            self.hostbed = Hosts(sc.peers, base=os.path.join(self.base, "ssh"),
                                 host_env=host_env)
            self.net: Optional[TestNet] = self.hostbed.net
            extra["env.ssh.opts"] = self.hostbed.ssh_opts
        else:
            self.net = TestNet(sc.peers) if any(f.startswith("partition")
                                                for f in sc.faults) else None
        # in namespaces every peer has its own address, so the usual ports do
        self.lines = ([f"{h}:8081:6123" for h in self.net.hosts] if self.net
                      else local_lines(sc.peers))
        self.urls = [f"http://{ln.rsplit(':', 2)[0]}:{ln.split(':')[1]}" for ln in self.lines]
        self.nodes = [f"{ln.rsplit(':', 2)[0]}:{ln.rsplit(':', 1)[1]}" for ln in self.lines]
        if self.net:  # peers on shared addresses: safe by default wants both (README: Security)
            import secrets
            from urllib.parse import urlsplit
            self.token = secrets.token_hex(16)
            extra["rest.auth.token"] = self.token
            extra["cluster.secret"] = secrets.token_hex(16)
            for u in self.urls:
                _TOKENS[urlsplit(u).netloc] = self.token
        self.probe_dir = os.path.join(self.base, "probes")
        spark = {"spark.connect.embedded": True, "spark.master": "local[1]",
                 "spark.driver.memory": "512m", "spark.conf.spark.sql.shuffle.partitions": 2,
                 "jobmanager.executor.preload": "pyspark", "rebalance.strategy": "none"} \
            if sc.streaming else {"spark.connect.embedded": False,
                                  "jobmanager.executor.preload": "none"}
        self.conf_dir = write_conf(self.base, self.lines, {
            **spark, "jobmanager.slots": 32, "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 1000,
            "restart-strategy.fixed-delay.delay": "200 ms", **extra, **sc.settings})
        self.env = dict(os.environ, JM_CONF_DIR=self.conf_dir)
        self.pids: dict[int, int] = {}     # peer index -> pid of the running peer
        self.all_pids: set[int] = set()
        self.before_start: list = []       # callables run before the peers start (mounts)
        self.after_stop: list = []         # and after they stopped (unmounts)

    def settings_value(self, key: str):
        from jm.config import load_config
        return load_config(self.conf_dir)[key]

    # ---- peers ----------------------------------------------------------------------
    def _pid_file(self, i: int) -> str:
        host, rest, _ = self.lines[i].split(":")
        run = os.path.join(self.base, "run")
        names = [n for n in os.listdir(run) if n.endswith(f"-{host}_{rest}.pid")]
        return os.path.join(run, names[0])

    def data_dir(self, i: int) -> str:
        host, _, raft = self.lines[i].split(":")
        return os.path.join(self.base, "data", f"{host}_{raft}")

    def start_peer(self, i: int) -> None:
        if self.hostbed is not None:  # on its host, over ssh, as start-cluster.sh does
            subprocess.run([os.path.join(ROOT, "bin", "cluster.sh"), "start"],
                           env=dict(self.env, JM_PEERS=self.lines[i]), check=True,
                           capture_output=True, timeout=60)
        else:
            prefix = self.net.exec_prefix(i) if self.net else []
            subprocess.run([*prefix, os.path.join(ROOT, "bin", "jobmanager.sh"), "start",
                            self.lines[i]], env=self.env, check=True, capture_output=True,
                           timeout=60)
        pid = int(open(self._pid_file(i)).read())
        self.pids[i] = pid
        self.all_pids.add(pid)

    def start_cluster(self) -> None:
        """Every peer on its host over ssh with bin/start-cluster.sh (hosts mode)."""
        r = subprocess.run([os.path.join(ROOT, "bin", "start-cluster.sh")], env=self.env,
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"start-cluster.sh failed: {r.stderr.strip()}")
        for i in range(self.sc.peers):
            self.pids[i] = int(open(self._pid_file(i)).read())
            self.all_pids.add(self.pids[i])

    def start(self) -> None:
        if self.hostbed is not None:
            for hook in self.before_start:  # mounts first: each sshd (and so every peer
                hook()                      # of its host) has a copy of the mount table
            self.hostbed.start()
            self.start_cluster()
        else:
            if self.net:
                self.net.create()
            for hook in self.before_start:
                hook()
            for i in range(self.sc.peers):
                self.start_peer(i)
        for url in self.urls:
            _wait(lambda u=url: call("GET", u + "/healthz")[1].get("ok"), 60, f"{url} healthy")
        if self.sc.streaming:
            self.wait_spark()

    def wait_spark(self, enough: Optional[int] = None) -> None:
        """Until every peer's Spark is ready, or `enough` of them: a streaming job that
        moves needs one ready peer to go to, not all of them."""
        if enough is not None:
            def ready() -> bool:
                return sum(1 for u in self.urls if _ready(u)) >= enough
            _wait(ready, 300, f"{enough} peers' Spark ready", interval=0.5)
            return
        for url in self.urls:
            _wait(lambda u=url: call("GET", u + "/healthz")[1].get("spark-ready"), 300,
                  f"{url} Spark ready", interval=0.5)

    def sql_rows(self, sql: str) -> list:
        """Run a SQL job on a live peer and return its rows ([] if it failed)."""
        status, body = call("POST", self.alive_url() + "/jobs", {"sql": sql, "name": "check"})
        if status != 202:
            return []
        jid = body["jobid"]
        res = _wait(lambda: (lambda r: r if r and r.get("state") in ("FINISHED", "FAILED")
                             else None)(call("GET", self.alive_url() + f"/jobs/{jid}/result")[1]),
                    180, "check query", interval=0.3)
        return (res.get("result") or {}).get("rows", []) if res["state"] == "FINISHED" else []

    def index_of(self, node: str) -> Optional[int]:
        return self.nodes.index(node) if node in self.nodes else None

    def stop(self) -> None:
        from urllib.parse import urlsplit
        for u in self.urls:
            _TOKENS.pop(urlsplit(u).netloc, None)
        for pid in list(self.all_pids):
            for sig in (signal.SIGCONT, signal.SIGTERM):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 15
        for pid in list(self.all_pids):
            while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
                time.sleep(0.05)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            if self.hostbed is not None:
                self.hostbed.stop()  # what is left in the namespaces, the sshds, the hosts
            elif self.net:
                self.net.destroy()
        finally:
            for hook in reversed(self.after_stop):  # the last mounted, unmounted first
                hook()

    def alive_url(self, exclude: Optional[int] = None) -> str:
        for i, url in enumerate(self.urls):
            if i != exclude and i in self.pids:
                try:
                    if call("GET", url + "/healthz", timeout=1)[0] == 200:
                        return url
                except OSError:
                    continue
        raise RuntimeError("no healthy peer")

    def leader_index(self) -> Optional[int]:
        try:
            leader = call("GET", self.alive_url() + "/overview")[1]["leader"]
        except (OSError, RuntimeError, KeyError, TypeError):
            return None
        return self.nodes.index(leader) if leader in self.nodes else None

    def voters(self) -> list[int]:
        """Indices of the Raft voters (the others are non-voting members)."""
        try:
            body = call("GET", self.alive_url() + "/cluster/peers")[1]
            ids = [m["id"] for m in body["members"]]
        except (OSError, RuntimeError, KeyError, TypeError):
            return []
        return [self.nodes.index(n) for n in ids if n in self.nodes]

    def jobs_of(self, i: int) -> list[str]:
        try:
            nodes = call("GET", self.alive_url(exclude=i) + "/nodes")[1]["nodes"]
        except (OSError, RuntimeError, KeyError, TypeError):
            return []
        return next((n["jobs"] for n in nodes if n["id"] == self.nodes[i]), [])


class Load(threading.Thread):
    """Clients posting jobs to all peers, retrying with the same request id."""

    def __init__(self, c: ChaosCluster, clients: int, rate: float, stop: threading.Event):
        super().__init__(daemon=True)
        self.c, self.clients, self.rate, self.stop_event = c, clients, rate, stop
        self.acked: list[tuple[str, str]] = []
        self.unacked: list[str] = []
        self.lock = threading.Lock()

    def _client(self, k: int) -> None:
        rnd = random.Random(k)
        while not self.stop_event.is_set():
            rid = f"load-{k}-{uuid.uuid4().hex[:12]}"
            spec = {"name": rid, "entry": "probe:once",
                    "pyfiles": [os.path.join(ROOT, "chaos") + "/"]}
            deadline = time.monotonic() + 30
            done = False
            while not done and time.monotonic() < deadline:
                url = rnd.choice(self.c.urls)
                try:
                    status, body = call("POST", url + "/jobs", spec, {"X-Request-Id": rid}, 3)
                    if status == 202:
                        with self.lock:
                            self.acked.append((rid, body["jobid"]))
                        done = True
                except OSError:
                    pass
                if not done:
                    time.sleep(0.2)  # client retry pacing
            if not done:
                with self.lock:
                    self.unacked.append(rid)
            time.sleep(1.0 / self.rate)

    def run(self) -> None:
        threads = [threading.Thread(target=self._client, args=(k,), daemon=True)
                   for k in range(self.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()


def _wait(fn, timeout: float, what: str, interval: float = 0.1):
    return wait_until(fn, timeout, what, interval, errors=(OSError,))


def _ready(url: str) -> bool:
    try:
        return bool(call("GET", url + "/healthz", timeout=2)[1].get("spark-ready"))
    except (OSError, ValueError, AttributeError):
        return False
