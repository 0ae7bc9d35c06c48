"""How a peer's jobs and SQL reach Spark: its engines (embedded Spark Connect servers at
the share level, jm/cluster/spark/engines.py), or none when `spark.remote` names one or
`spark.connect.embedded` is off; their token, the peer engine's URL, readiness and
warm-up. One service object the peer hands to the components that need it, instead of
each asking the peer.
"""
from __future__ import annotations

import asyncio
import logging
import os
import secrets
import shutil
from typing import Callable, Optional

from jm.cluster.spark.engines import Engines
from jm.config import Config
from jm.policy.spark.engines import PEER_ENGINE, EngineKey, ShareLevel
from raft.tenants import TenantRuntime
from jm.configvalues import parse_memory
from jm.policy.jobs.runparams import TOKEN_ENV, RunParams, fence_interval
from jm.runtime.cgroups import EngineCgroup, heap
from jm.runtime.confine import passable
from jm.runtime.executor import Executor, Started
from jm.runtime.sparkapp import SCRATCH
from jm.runtime.ports import free_port
from jm.runtime.sparkjvm import server_conf
from jm.runtime.sparkserver import SparkConnectServer

log = logging.getLogger(__name__)


class SparkAccess:
    def __init__(self, conf: Config, node: str, data_dir: str, log_dir: str) -> None:
        self.conf = conf
        self.spark = spark = conf.spark
        self.node = node
        self.data_dir = data_dir
        self.log_dir = log_dir
        # the embedded Connect server's token: its clients are this peer's jobs (through
        # the zygote's environment) and SQL worker, and whoever is given spark.connect.token
        self.token = ((spark.token or secrets.token_urlsafe(32))
                      if spark.runs_engines else None)
        # what every process this peer starts gets in its environment
        self.child_env = {TOKEN_ENV: self.token} if self.token else {}
        self.engines: Optional[Engines] = None
        self._executor: Optional[Executor] = None
        # told of an engine's application (started, stopped, waiting for executors)
        self.on_info: list[Callable[[EngineKey, dict], None]] = []
        archive = spark.class_archive
        if archive and spark.runs_engines and not os.path.isfile(archive):  # (not fatal: slower)
            log.warning("spark.class-archive %s is no file: Spark starts without it (make it "
                        "with python -m jm.runtime.classarchive %s)", archive, archive)

    def build(self, executor: Executor, guard: Callable[[str, int], None],
              on_ready_change: Callable[[], None],
              unguard: Callable[[str], None] = lambda name: None) -> None:
        """The engines (none started): `guard(name, pid)` makes an engine's JVM die with
        the lease (`unguard(name)` once it is stopped); `on_ready_change` hears of the
        peer engine's readiness."""
        self._executor = executor
        self._guard = guard
        self._on_ready_change = on_ready_change
        spark = self.spark
        self.engines = Engines(
            ShareLevel(spark.share_level), spark.engine_idle_timeout, spark.engine_max_per_peer,
            self._make, remote=spark.remote, embedded=spark.runs_engines)
        self.engines.on_stopped.append(lambda key, server: unguard(_guard_name(key)))
        self.engines.on_stopped.append(self._forget)

    def _tell_info(self, key: EngineKey, info: dict) -> None:
        for hook in self.on_info:
            hook(key, info)

    def _forget(self, key: EngineKey, server: SparkConnectServer) -> None:
        """An engine stopped for good: its data dir (scratch, work dir) goes; its log dir
        stays, capped by the janitor like the peer's other logs."""
        if key != PEER_ENGINE:
            shutil.rmtree(os.path.join(self.data_dir, "engines", key.name), True)

    def _make(self, key: EngineKey, rt: TenantRuntime) -> SparkConnectServer:
        """A server for `key`: the peer engine where it always was (its port, log and
        ready file); another engine under engines/<name> of the data and log dirs, run as
        its tenant's OS user (in its own work dir) and in a cgroup of its tenant's memory
        and CPU, when `rt` names them."""
        conf = self.conf
        peer = key == PEER_ENGINE
        data_dir = self.data_dir if peer else os.path.join(self.data_dir, "engines", key.name)
        log_dir = self.log_dir if peer else os.path.join(self.log_dir, "engines", key.name)
        os.makedirs(data_dir, exist_ok=True)
        if rt.os_user and not peer:  # the way to its work dir and its Spark conf
            os.makedirs(log_dir, exist_ok=True)
            for d in (data_dir, log_dir):
                passable(os.path.dirname(d))
                passable(d)
        spark = self.spark
        port = (spark.port if peer else 0) or free_port()
        name = _guard_name(key)
        return SparkConnectServer(
            port, spark.master, log_dir,
            os.path.join(data_dir, "spark-ready"),
            _heap(spark.driver_memory, 0 if peer else rt.memory),
            server_conf(spark.master, spark.defaults, spark.cores),
            spark.log_level, spark.startup_timeout,
            self._warmup if peer else _no_warmup,
            on_start=lambda pid: self._guard(name, pid),
            nice=conf.executor.nice,
            on_ready_change=self._on_ready_change if peer else (lambda: None),
            waiting_after=spark.executor_wait_warning,
            on_info=lambda info: self._tell_info(key, info),
            scratch_dir=os.path.join(data_dir, SCRATCH),
            env_pass=conf.executor.env_pass,
            # a tenant's or a job's engine opens to its own work only: a token of its own
            token=self.token if peer else secrets.token_urlsafe(32),
            on_exit=lambda code, tail, over: self.engines.lost(key, code, tail, over),
            user=None if peer else rt.os_user,
            work_dir=os.path.join(data_dir, "work") if rt.os_user and not peer else None,
            cgroup=EngineCgroup(f"{os.getpid()}-{key.name}", rt.memory, rt.cpu)
            if not peer and (rt.memory or rt.cpu) else None,
            class_archive=spark.class_archive)

    @property
    def server(self) -> Optional[SparkConnectServer]:
        """The peer engine (`share-level: peer`), None at other levels or without one."""
        return self.engines.peer_engine if self.engines is not None else None

    def remote(self) -> Optional[str]:
        """The Connect URL of the peer's own engine or `spark.remote` (None: neither)."""
        if self.spark.remote:
            return self.spark.remote
        server = self.server
        return server.url if server else None

    def ready(self) -> bool:
        """Whether jobs started here get a Spark session without waiting for a JVM (at the
        tenant and job levels engines start with their work: the peer is ready)."""
        server = self.server
        return server is None or server.ready.is_set()

    def generation(self) -> int:
        """Which start of the peer engine this is (0: none)."""
        server = self.server
        return server.generation if server is not None else 0

    @property
    def ready_file(self) -> Optional[str]:
        server = self.server
        return server.ready_file if server else None

    def info(self) -> Optional[dict]:
        """The peer engine's application (id, UI, waiting for executors)."""
        server = self.server
        return server.info if server else None

    async def _warmup(self, server: SparkConnectServer) -> None:
        """A first statement through a job process: the server, the client libraries and
        the session are warm before the first job needs them."""
        params = RunParams(
            job_id="_warmup", attempt=server.generation, node=self.node,
            sql="SELECT 1 AS warmup",
            log_path=os.path.join(self.log_dir, "spark-warmup.log"),
            result_path=os.path.join(self.data_dir, "warmup-result.json"),
            error_path=os.path.join(self.data_dir, "warmup-error.json"),
            checkpoint_dir=os.path.join(self.data_dir, "warmup"),
            spark_remote=server.url, spark_ready_file=None,
            spark_wait=self.spark.startup_timeout,
            max_result_rows=1, max_result_size=1024,
            fence_interval=fence_interval(self.conf.timeouts.lease))
        started = await self._executor.spawn(params)
        if isinstance(started, Started):  # (Refused: no lease, no warm-up)
            await asyncio.wait_for(started.process.exited, self.spark.startup_timeout)


def _guard_name(key: EngineKey) -> str:
    """The name the peer's guard knows an engine's JVM by (`spark`: the peer engine)."""
    return "spark" if key == PEER_ENGINE else f"engine:{key.name}"


async def _no_warmup(server: SparkConnectServer) -> None:
    """An engine started for its work: that work's first statement warms it."""


def _heap(driver_memory: str, limit: int) -> str:
    """The engine's --driver-memory: spark.driver.memory, within its cgroup's limit."""
    if not limit:
        return driver_memory
    try:
        configured = parse_memory(driver_memory)
    except ValueError:
        return driver_memory  # (Spark's own syntax it understands and we do not)
    return f"{heap(limit, configured) >> 20}m"
