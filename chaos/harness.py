"""Chaos harness: N real peers started with bin/jobmanager.sh, each in its own network
namespace (or all on 127.0.0.1 when partitions are not asked for), probe jobs, a
submission load, and faults for a bounded time: SIGKILL of a random peer or of the
leader, SIGSTOP/SIGCONT pauses longer than the lease, restarts of killed peers, and
partitions of one peer from the others. Every process it starts is stopped by PID."""
from __future__ import annotations

import os
import random
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Optional

from chaos.netns import TestNet
from chaos.peers import PeerProcesses, request
from jm.local.localcluster import local_lines, wait_until, write_conf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_TOKENS: dict = {}  # "host:port" -> the rest.auth.token of the cluster there


def auth_headers(url: str) -> dict:
    """The bearer credential the peer at `url` wants (clusters on test hosts have one)."""
    from urllib.parse import urlsplit
    token = _TOKENS.get(urlsplit(url).netloc)
    return {"Authorization": f"Bearer {token}"} if token else {}


def call(method: str, url: str, body=None, headers=None, timeout: float = 3.0):
    """(status, JSON body): chaos.peers.request with the cluster's bearer token; an error
    answer whose body is not JSON gives None."""
    status, parsed, _ = request(method, url, body, {**auth_headers(url), **(headers or {})},
                                timeout=timeout)
    if status >= 400 and isinstance(parsed, str):
        parsed = None
    return status, parsed


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


class ChaosCluster(PeerProcesses):
    """The scenario's peers on the shared process harness (chaos/peers.py): in network
    namespaces (partitions), or on namespace hosts over ssh (sc.hosts), or on 127.0.0.1."""
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
        lines = ([f"{h}:8081:6123" for h in self.net.hosts] if self.net
                 else local_lines(sc.peers))
        urls = [f"http://{ln.rsplit(':', 2)[0]}:{ln.split(':')[1]}" for ln in lines]
        if self.net:  # peers on shared addresses: safe by default wants both (README: Security)
            import secrets
            from urllib.parse import urlsplit
            self.token = secrets.token_hex(16)
            extra["rest.auth.token"] = self.token
            extra["cluster.secret"] = secrets.token_hex(16)
            for u in urls:
                _TOKENS[urlsplit(u).netloc] = self.token
        self.probe_dir = os.path.join(self.base, "probes")
        spark = {"spark.connect.embedded": True, "spark.master": "local[1]",
                 "spark.driver.memory": "512m", "spark.conf.spark.sql.shuffle.partitions": 2,
                 "jobmanager.executor.preload": "pyspark", "rebalance.strategy": "none"} \
            if sc.streaming else {"spark.connect.embedded": False,
                                  "jobmanager.executor.preload": "none"}
        conf_dir = write_conf(self.base, lines, {
            **spark, "jobmanager.slots": 32, "restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 1000,
            "restart-strategy.fixed-delay.delay": "200 ms",
            # a graceful stop (stop-leader) moves the probe jobs, which never end, after this
            "jobmanager.stop.drain-deadline": "1 s", **extra, **sc.settings})
        super().__init__(self.base, lines, conf_dir)
        self.before_start: list = []       # callables run before the peers start (mounts)
        self.after_stop: list = []         # and after they stopped (unmounts)

    def settings_value(self, key: str):
        from jm.config import load_config
        return load_config(self.conf_dir)[key]

    # ---- the shared harness's hooks ----------------------------------------------
    @property
    def pids(self) -> dict[int, int]:
        """Peer index -> pid of the running peer."""
        return self.live

    def call(self, method, url, body=None, timeout: float = 3.0):
        return call(method, url, body, timeout=timeout)

    def wait(self, fn, timeout, what, interval=0.1):
        return poll_for(fn, timeout, what, interval)

    def exec_prefix(self, i: int) -> list[str]:
        return self.net.exec_prefix(i) if self.net else []

    # ---- peers ----------------------------------------------------------------------
    def data_dir(self, i: int) -> str:
        host, _, raft = self.lines[i].split(":")
        return os.path.join(self.base, "data", f"{host}_{raft}")

    def start_peer(self, i: int) -> int:
        if self.hostbed is None:  # with bin/jobmanager.sh, in its namespace if any
            return super().start_peer(i)
        # on its host, over ssh, as start-cluster.sh does
        r = self.run("cluster.sh", "start", env={"JM_PEERS": self.lines[i]})
        self._check(r, f"cluster.sh start {self.lines[i]}")
        self.live[i] = self.peer_pid(i)
        return self.live[i]

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
        for i in range(len(self.urls)):
            self.wait_healthy(i, 60)
        if self.sc.streaming:
            self.wait_spark()

    def wait_spark(self, enough: Optional[int] = None) -> None:
        """Until every peer's Spark is ready, or `enough` of them: a streaming job that
        moves needs one ready peer to go to, not all of them."""
        if enough is not None:
            def ready() -> bool:
                return sum(1 for u in self.urls if _ready(u)) >= enough
            poll_for(ready, 300, f"{enough} peers' Spark ready", interval=0.5)
            return
        for url in self.urls:
            poll_for(lambda u=url: call("GET", u + "/healthz")[1].get("spark-ready"), 300,
                     f"{url} Spark ready", interval=0.5)

    def sql_rows(self, sql: str) -> list:
        """Run a SQL job on a live peer and return its rows ([] if it failed)."""
        status, body = call("POST", self.alive_url() + "/jobs", {"sql": sql, "name": "check"})
        if status != 202:
            return []
        jid = body["jobid"]
        def ended():
            r = call("GET", self.alive_url() + f"/jobs/{jid}/result")[1]
            return r if r and r.get("state") in ("FINISHED", "FAILED") else None
        res = poll_for(ended, 180, "check query", interval=0.3)
        return (res.get("result") or {}).get("rows", []) if res["state"] == "FINISHED" else []

    def stop(self) -> None:
        from urllib.parse import urlsplit
        for u in self.urls:
            _TOKENS.pop(urlsplit(u).netloc, None)
        self.terminate_all(15)
        try:
            if self.hostbed is not None:
                self.hostbed.stop()  # what is left in the namespaces, the sshds, the hosts
            elif self.net:
                self.net.destroy()
        finally:
            for hook in reversed(self.after_stop):  # the last mounted, unmounted first
                hook()

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


def poll_for(fn, timeout: float, what: str, interval: float = 0.1):
    """wait_until, a refused or reset connection counted as not yet."""
    return wait_until(fn, timeout, what, interval, errors=(OSError,))


def _ready(url: str) -> bool:
    try:
        return bool(call("GET", url + "/healthz", timeout=2)[1].get("spark-ready"))
    except (OSError, ValueError, AttributeError):
        return False
