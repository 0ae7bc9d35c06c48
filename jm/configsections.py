"""Typed sections of the configuration, read once: what several parts share, given to them
as one frozen record instead of each looking its keys up (jm/config.py `Config.timeouts`,
`Config.spark`, `Config.executor`)."""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping, Optional


@dataclass(frozen=True)
class Timeouts:
    """The waits a peer's parts share (seconds)."""
    commit: float     # raft.commit-timeout: a write of the peer's own, committed and applied
    write: float      # rest.write-timeout: a client's write (then 503, outcome unknown)
    heartbeat: float  # heartbeat.timeout: a peer silent this long is dead
    interval: float   # heartbeat.interval
    lease: float      # jobmanager.lease-timeout: a peer's jobs run while it holds one

    @staticmethod
    def of(conf: Any) -> "Timeouts":
        return Timeouts(commit=conf["raft.commit-timeout"], write=conf["rest.write-timeout"],
                        heartbeat=conf["heartbeat.timeout"], interval=conf["heartbeat.interval"],
                        lease=conf["jobmanager.lease-timeout"])


@dataclass(frozen=True)
class SparkSettings:
    """Where a peer's jobs and SQL find Spark, and how it runs its engines (spark.*)."""
    master: str                   # spark.master: the cluster manager engines and drivers use
    remote: Optional[str]         # spark.remote: a Connect server elsewhere (no engines here)
    embedded: bool                # spark.connect.embedded
    port: int                     # spark.connect.port: the peer engine's (0: a free one)
    token: Optional[str]          # spark.connect.token: the peer engine's (None: made up)
    cores: int                    # spark.connect.cores
    startup_timeout: float        # spark.connect.startup-timeout (s)
    share_level: str              # spark.connect.share-level: peer, tenant or job
    engine_idle_timeout: float    # spark.connect.engine.idle-timeout (s)
    engine_max_per_peer: int      # spark.connect.engine.max-per-peer
    driver_memory: str            # spark.driver.memory
    log_level: str                # spark.log.level
    class_archive: Optional[str]  # spark.class-archive (None: none)
    executor_wait_warning: float  # spark.executor-wait-warning (s)
    defaults: Mapping[str, str]   # spark.conf.*: Spark properties every driver gets

    endpoint: bool = True         # spark.connect.endpoint.enabled

    @property
    def runs_engines(self) -> bool:
        """The peer runs its own Connect servers (embedded, and no spark.remote)."""
        return self.embedded and not self.remote

    @property
    def serves_connect(self) -> bool:
        """The peer serves Spark Connect clients (its endpoint is on, and it has Spark)."""
        return self.endpoint and (self.runs_engines or bool(self.remote))

    @staticmethod
    def of(conf: Any) -> "SparkSettings":
        return SparkSettings(
            master=conf["spark.master"], remote=conf["spark.remote"] or None,
            embedded=bool(conf["spark.connect.embedded"]), port=conf["spark.connect.port"],
            token=conf["spark.connect.token"], cores=conf["spark.connect.cores"],
            startup_timeout=conf["spark.connect.startup-timeout"],
            share_level=conf["spark.connect.share-level"],
            engine_idle_timeout=conf["spark.connect.engine.idle-timeout"],
            engine_max_per_peer=conf["spark.connect.engine.max-per-peer"],
            driver_memory=conf["spark.driver.memory"], log_level=conf["spark.log.level"],
            class_archive=conf["spark.class-archive"] or None,
            executor_wait_warning=conf["spark.executor-wait-warning"],
            defaults=MappingProxyType(dict(conf.spark_conf)),
            endpoint=bool(conf["spark.connect.endpoint.enabled"]))


@dataclass(frozen=True)
class ExecutorSettings:
    """How a peer starts the processes that run users' code (jobmanager.executor.*): the
    zygote, SQL workers, Livy sessions and engines."""
    preload: str                  # what the zygote imports before it forks (pyspark, none)
    nice: int                     # their niceness
    cgroup: bool                  # a cgroup v2 per job where possible
    env_pass: tuple[str, ...]     # environment variables they get from the peer's
    proxy_users: tuple[str, ...]  # the OS users a job or session may ask to run as

    @staticmethod
    def of(conf: Any) -> "ExecutorSettings":
        return ExecutorSettings(
            preload=conf["jobmanager.executor.preload"], nice=conf["jobmanager.executor.nice"],
            cgroup=conf["jobmanager.executor.cgroup"],
            env_pass=tuple(conf["jobmanager.executor.env-pass"]),
            proxy_users=tuple(conf["jobmanager.executor.proxy-users"]))
