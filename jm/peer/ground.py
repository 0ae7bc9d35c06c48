"""What a peer has before it joins its cluster (`lay_ground`): its directories and stores,
the processes it supervises (none started: the executor's zygote, the Spark engines),
its credentials, TLS and client of the other peers, its metrics, and the two signals its
life is told by (`started`: every component runs; `removed`: the cluster took it out)."""
from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Optional

from jm.cluster import tls
from jm.cluster.blobs import BlobStore
from jm.cluster.jobs.janitor import Janitor, JanitorConfig
from jm.cluster.metrics import PeerMetrics
from jm.cluster.peerclient import PeerClient
from jm.cluster.spark.sparkaccess import SparkAccess
from jm.config import Config, PeerAddress
from jm.policy.members.security import peer_credential
from jm.runtime.executor import Executor
from jm.runtime.limits import from_conf as job_limits


class LeaseGuards:
    """The processes besides the job processes that die with the lease (an engine's JVM,
    a SQL worker): the zygote kills them when the lease runs out."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self._pids: dict[str, int] = {}

    def guard(self, name: str, pid: int) -> None:
        self._pids[name] = pid
        self.executor.guard(list(self._pids.values()))

    def unguard(self, name: str) -> None:
        """`name` was stopped for good (an idle engine): its pid is no longer ours."""
        if self._pids.pop(name, None) is not None:
            self.executor.guard(list(self._pids.values()))


@dataclass(frozen=True)
class Ground:
    node: str
    data_dir: str              # <jobmanager.data-dir>/<node>: blobs, jobs, engines, raft
    log_dir: str               # <env.log.dir>/<node>
    raft_dir: str              # the journal, snapshots and identity (the peer's alone)
    blobs: BlobStore           # this peer's artifacts
    ha_blobs: BlobStore        # a durable copy of every upload, where every peer reads it
    janitor: Janitor           # deletes what nothing needs, caps job logs, watches disks
    sparks: SparkAccess        # the Connect servers, their token and URL
    executor: Executor         # the warm zygote that forks job processes
    guards: LeaseGuards
    token: Optional[str]       # rest.auth.token
    credential: Optional[str]  # what other peers show (derived from cluster.secret)
    peer_client: PeerClient    # to the other peers
    ssl_server: object         # HTTPS (rest.ssl.*): how this peer serves REST
    client_ssl: object         # ... and verifies the other peers
    scheme: str
    metrics: PeerMetrics
    started: asyncio.Event     # every component runs (REST answers writes 503 before)
    removed: asyncio.Event     # the cluster took this peer out: the process stops


def lay_ground(conf: Config, me: PeerAddress) -> Ground:
    node = me.node_id
    secret = conf["cluster.secret"]
    token = conf.rest_token()
    data_dir = os.path.join(conf.path("jobmanager.data-dir"), node.replace(":", "_"))
    log_dir = os.path.join(conf.path("env.log.dir"), node.replace(":", "_"))
    blobs = BlobStore(os.path.join(data_dir, "blobs"))
    ha_blobs = BlobStore(os.path.join(conf.path("high-availability.storageDir"), "blobs"))
    sparks = SparkAccess(conf, node, data_dir, log_dir)
    ex = conf.executor
    executor = Executor(log_dir, ex.preload, ex.nice, job_limits(conf), ex.cgroup,
                        env_pass=ex.env_pass, env_add=sparks.child_env)
    # what this peer shows other peers (artifact and log fetches): a credential derived
    # from cluster.secret (never the secret, which may be the Raft password)
    credential = peer_credential(secret) if secret else None
    shown = credential or token
    client_ssl = tls.client_context(conf)
    return Ground(
        node=node, data_dir=data_dir, log_dir=log_dir,
        raft_dir=os.path.join(data_dir, "raft"), blobs=blobs, ha_blobs=ha_blobs,
        janitor=Janitor(JanitorConfig.from_conf(conf, data_dir, log_dir), blobs, node,
                        ha_blobs),
        sparks=sparks, executor=executor, guards=LeaseGuards(executor), token=token,
        credential=credential,
        peer_client=PeerClient({"Authorization": f"Bearer {shown}"} if shown else {},
                               client_ssl),
        ssl_server=tls.server_context(conf), client_ssl=client_ssl, scheme=tls.scheme(conf),
        metrics=PeerMetrics(node), started=asyncio.Event(), removed=asyncio.Event())
