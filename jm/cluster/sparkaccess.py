"""How a peer's jobs and SQL reach Spark: the embedded Spark Connect server (or none, when
`spark.remote` names one or `spark.connect.embedded` is off), its token, its URL, whether
it is ready, its warm-up. One service object the peer hands to the components that need
it, instead of each asking the peer.
"""
from __future__ import annotations

import asyncio
import os
import secrets
from typing import Callable, Optional

from jm.config import Config
from jm.policy.runparams import RunParams
from jm.runtime.executor import Executor
from jm.runtime.sparkapp import SCRATCH
from jm.runtime.sparkserver import TOKEN_ENV, SparkConnectServer, free_port, server_conf


class SparkAccess:
    def __init__(self, conf: Config, node: str, data_dir: str, log_dir: str) -> None:
        self.conf = conf
        self.node = node
        self.data_dir = data_dir
        self.log_dir = log_dir
        self.embedded = bool(conf["spark.connect.embedded"] and not conf["spark.remote"])
        # the embedded Connect server's token: its clients are this peer's jobs (through
        # the zygote's environment) and SQL worker, and whoever is given spark.connect.token
        self.token = ((conf["spark.connect.token"] or secrets.token_urlsafe(32))
                      if self.embedded else None)
        # what every process this peer starts gets in its environment
        self.child_env = {TOKEN_ENV: self.token} if self.token else {}
        self.server: Optional[SparkConnectServer] = None
        self._executor: Optional[Executor] = None

    def build(self, executor: Executor, guard: Callable[[str, int], None],
              on_ready_change: Callable[[], None], on_info: Callable[[dict], None]) -> None:
        """The embedded server (not started): `guard(name, pid)` makes its JVM die with the
        lease; `on_ready_change` and `on_info(info)` hear of its readiness and its
        application (started, stopped, waiting for executors)."""
        if not self.embedded:
            return
        conf, self._executor = self.conf, executor
        self.server = SparkConnectServer(
            conf["spark.connect.port"] or free_port(), conf["spark.master"], self.log_dir,
            os.path.join(self.data_dir, "spark-ready"), conf["spark.driver.memory"],
            server_conf(conf["spark.master"], conf.spark_conf, conf["spark.connect.cores"]),
            conf["spark.log.level"], conf["spark.connect.startup-timeout"],
            self._warmup, on_start=lambda pid: guard("spark", pid),
            nice=conf["jobmanager.executor.nice"], on_ready_change=on_ready_change,
            waiting_after=conf["spark.executor-wait-warning"], on_info=on_info,
            scratch_dir=os.path.join(self.data_dir, SCRATCH),
            env_pass=conf["jobmanager.executor.env-pass"], token=self.token)

    def remote(self) -> Optional[str]:
        """The Connect URL this peer's jobs and SQL worker use (None: no Spark)."""
        if self.conf["spark.remote"]:
            return self.conf["spark.remote"]
        return self.server.url if self.server else None

    def ready(self) -> bool:
        """Whether jobs started here get a Spark session without waiting for a JVM."""
        return self.server is None or self.server.ready.is_set()

    def generation(self) -> int:
        """Which start of the embedded server this is (0: none)."""
        return self.server.generation if self.server is not None else 0

    @property
    def ready_file(self) -> Optional[str]:
        return self.server.ready_file if self.server else None

    def info(self) -> Optional[dict]:
        """The embedded server's application (id, UI, waiting for executors)."""
        return self.server.info if self.server else None

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
            spark_wait=self.conf["spark.connect.startup-timeout"],
            max_result_rows=1, max_result_size=1024)
        jp = await self._executor.spawn(params)
        await asyncio.wait_for(jp.exited, self.conf["spark.connect.startup-timeout"])
