"""One JobManager peer: wires Raft, REST, Dispatcher, ResourceManager, executor and
Spark together, starts them in order and stops them in reverse order.

Run as `python -m jm.cluster.peer --conf-dir conf [--peer host:rest:raft] [-D key=value ...]`.
"""
from __future__ import annotations

import argparse
import asyncio
import faulthandler
import gc
import hashlib
import logging
import os
import shutil
import secrets
import signal
import socket
import sys
import time
from typing import Any, Optional

from aiohttp import web

from jm.cluster.batcher import Batcher
from jm.cluster.blobs import BlobStore
from jm.cluster.dispatcher import Dispatcher
from jm.cluster.gateway import PeerGateway
from jm.cluster.janitor import Janitor, JanitorConfig
from jm.cluster.peerlog import peer_log_handler
from jm.cluster.jobservices import JobEnv, make_reporter
from jm.cluster.lease import Lease
from jm.cluster import tls
from jm.cluster.identity import amnesia_guard, early_answer, keep_identity, serve_early
from jm.cluster.joblists import WARM_AFTER
from jm.cluster.voting import VoterCandidate, VotingCore
from jm.cluster.membership import Membership, ask_members, has_raft_data, initial_members
from jm.cluster.beats import BeatSender, LeaseRounds
from jm.cluster.looplag import LoopMonitor
from jm.cluster.metrics import PeerMetrics
from jm.cluster.resourcemanager import RebalanceConfig, ResourceManager
from jm.config import (Config, ConfigError, PeerAddress, choose_self, load_config,
                       parse_overrides, read_masters, rest_base_url)
from jm.policy.identity import NON_VOTER
from jm.policy.voters import DEFAULT_VOTERS, NON_VOTING, VotersError, voter_count
from jm.policy.security import peer_credential, start_refusal
from jm.runtime.executor import Executor
from jm.runtime.limits import from_conf as job_limits
from jm.cluster.sqlgateway import SqlGateway
from jm.cluster.sqljobs import SqlJobExecutor
from jm.runtime.sparkapp import SCRATCH
from jm.policy.runparams import RunParams
from jm.runtime.sparkserver import (TOKEN_ENV, SparkConnectServer, free_port, server_conf,
                                    spark_conf_dir)
from raft import compat
from raft.commands import AddArtifact, Heartbeat, RegisterPeer, RetirePeer, SubmitJobs
from raft.node import RaftHost, RaftSettings, RaftUnavailable
from rest.app import HEALTH_EXTRA, auth_middleware, make_app

log = logging.getLogger("jm.cluster.peer")
_NEVER = asyncio.Event()  # `registered` before the lease loop exists


def raft_settings(conf: Config) -> RaftSettings:
    return RaftSettings(
        min_timeout=conf["raft.min-timeout"], max_timeout=conf["raft.max-timeout"],
        append_entries_period=conf["raft.append-entries-period"],
        leader_fallback_timeout=conf["raft.leader-fallback-timeout"],
        connection_retry_time=conf["raft.connection-retry-time"],
        use_batch=conf["raft.use-batch"], fsync=conf["raft.fsync"],
        password=conf["raft.password"] or conf["cluster.secret"],
        max_message_size=conf["raft.max-message-size"],
        max_connections=conf["raft.max-connections"])


class Peer:
    """A JobManager peer: builds, starts and stops its components."""

    def __init__(self, conf: Config, me: PeerAddress, masters: list[PeerAddress],
                 rejoin: bool = False) -> None:
        self.conf = conf
        self.rejoin = rejoin  # --rejoin: its Raft data is lost; no vote until caught up
        self.me = me
        self.node = me.node_id
        self.masters = masters
        try:  # how many of conf/masters vote when the cluster is created
            self.voters = voter_count(conf["raft.voters"], len(masters))
        except VotersError as exc:
            raise ConfigError(str(exc)) from None
        # the voting core's size the leader keeps by promoting non-voters
        self.voters_target = conf["raft.voters"] or DEFAULT_VOTERS
        self.token = conf.rest_token()
        self.secret = conf["cluster.secret"]
        self._check_exposure()  # before anything is made on disk
        self.data_dir = os.path.join(conf.path("jobmanager.data-dir"), self.node.replace(":", "_"))
        self.log_dir = os.path.join(conf.path("env.log.dir"), self.node.replace(":", "_"))
        self.blobs = BlobStore(os.path.join(self.data_dir, "blobs"))
        # a durable copy of every upload, where every peer can read it
        self.ha_blobs = BlobStore(os.path.join(conf.path("high-availability.storageDir"),
                                               "blobs"))
        # deletes what nothing needs, caps job logs, watches free space
        self.janitor = Janitor(JanitorConfig.from_conf(conf, self.data_dir, self.log_dir),
                               self.blobs, self.node, self.ha_blobs)
        self.raft: Optional[RaftHost] = None
        self.raft_dir = os.path.join(self.data_dir, "raft")
        self.membership: Optional[Membership] = None
        self.voting: Optional[VotingCore] = None  # promotions (jm/cluster/voting.py)
        self.candidate: Optional[VoterCandidate] = None  # this peer becoming a voter
        # set when this peer was removed from the cluster: the process stops (_serve)
        self.removed = asyncio.Event()
        self._removal_check: Optional[asyncio.Future] = None
        self.runner: Optional[web.AppRunner] = None
        # the embedded Connect server's token: its clients are this peer's jobs (through
        # the zygote's environment) and SQL worker, and whoever is given spark.connect.token
        self.connect_token = ((conf["spark.connect.token"] or secrets.token_urlsafe(32))
                              if conf["spark.connect.embedded"] and not conf["spark.remote"]
                              else None)
        self.child_env = {TOKEN_ENV: self.connect_token} if self.connect_token else {}
        self.executor = Executor(self.log_dir, conf["jobmanager.executor.preload"],
                                 conf["jobmanager.executor.nice"], job_limits(conf),
                                 conf["jobmanager.executor.cgroup"],
                                 env_pass=conf["jobmanager.executor.env-pass"],
                                 env_add=self.child_env)
        self.spark: Optional[SparkConnectServer] = None
        self.reporter: Optional[Batcher] = None
        self.submitter: Optional[Batcher] = None
        self.dispatcher: Optional[Dispatcher] = None
        self.rm: Optional[ResourceManager] = None
        self.lease: Optional[Lease] = None
        self.rounds: Optional[LeaseRounds] = None  # the leader's heartbeat rounds
        self.beats: Optional[BeatSender] = None
        self.sql = SqlGateway(self)
        self._guarded: dict[str, int] = {}  # processes the zygote kills with the lease
        self._tasks: list[asyncio.Task] = []
        self._warming: Optional[asyncio.Future] = None  # filling the overview's row cache
        self.started = False  # every component is up (REST answers writes 503 until then)
        self.started_at = time.time()
        # what this peer shows other peers (artifact and log fetches): a credential
        # derived from cluster.secret (never the secret, which may be the Raft password)
        credential = peer_credential(self.secret) if self.secret else self.token
        self.peer_headers = {"Authorization": f"Bearer {credential}"} if credential else {}
        # HTTPS (rest.ssl.*): how this peer serves REST and verifies the other peers
        self.ssl_server = tls.server_context(conf)
        self.client_ssl = tls.client_context(conf)
        self.scheme = tls.scheme(conf)
        self.gateway = PeerGateway(self)  # what REST may ask of this peer
        self.metrics = PeerMetrics(self.node, self.gateway.gauges)  # a registry per peer

    def _check_exposure(self) -> None:
        """Safe by default (jm.policy.security.start_refusal): ConfigError when REST or
        Raft listens beyond loopback without rest.auth.token and cluster.secret."""
        refusal, warnings = start_refusal(
            [self.conf["rest.bind-address"] or self.me.host, self.me.host], self.token,
            self.secret, self.conf["raft.password"], self.conf["security.insecure"], resolve)
        if refusal:
            raise ConfigError(refusal)
        for w in warnings:
            log.warning("%s", w)

    def _blob_from_shared(self, art_id: str, name: str) -> str:
        """The artifact from high-availability.storageDir, its hash checked (LookupError)."""
        shared = self.ha_blobs.local_path(art_id, name)
        if shared is None:
            raise LookupError(f"artifact {art_id} is on no peer that answers and not in "
                              "high-availability.storageDir")
        with open(shared, "rb") as f:
            data = f.read()
        if "sha256:" + hashlib.sha256(data).hexdigest() != art_id:
            raise LookupError(f"the shared copy of artifact {art_id} is damaged")
        self.blobs.put(name, data)
        return self.blobs.local_path(art_id, name)

    def url_of(self, host: str, rest_port: int) -> str:
        """The REST base URL of a peer (https with rest.ssl.enabled)."""
        return rest_base_url(self.scheme, host, rest_port)

    def _rest_url_of_node(self, node: str) -> Optional[str]:
        with self.raft.read() as st:
            p = st.peers.get(node)
            return self.url_of(p.host, p.rest_port) if p is not None else None

    # ---- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        os.makedirs(self.data_dir, exist_ok=True)
        os.makedirs(self.log_dir, exist_ok=True)
        os.makedirs(self.raft_dir, exist_ok=True)
        had_data = has_raft_data(self.raft_dir)
        # until the REST app binds, the port answers who this peer is (a new cluster's
        # starting peers find each other: jm/policy/identity.py)
        early = await serve_early(
            self.conf["rest.bind-address"] or self.me.host, self.me.rest_port,
            self.ssl_server, early_answer(had_data, self.raft_dir, self.node),
            auth_middleware(self.token, peer_credential(self.secret) if self.secret else None))
        try:
            role, members = await initial_members(self.me, self.masters, self.raft_dir,
                                                  self.peer_headers, self.voters, self.scheme,
                                                  self.client_ssl)
            # (for every role: a non-voter keeps no log, but a data dir of another peer or
            # cluster is an operator's mistake all the same, and it may be promoted)
            mode = await amnesia_guard(
                had_data, self.raft_dir, self.node,
                [m.url(self.scheme) for m in self.masters if m != self.me],
                self.peer_headers, self.client_ssl, self.rejoin, self.conf["cluster.seed-wait"])
        finally:
            await early.cleanup()
        others = [m for m in members if m != self.me.raft_addr]
        self.raft = RaftHost(self.me.raft_addr, others, self.raft_dir,
                             raft_settings(self.conf), loop, {}, no_vote=mode == NON_VOTER,
                             voter=role != NON_VOTING)
        log.info("peer %s starts as a %s (voters: %s)", self.node,
                 "voter" if role != NON_VOTING else "non-voting member", ", ".join(members))
        self.raft.apply_hooks.append(self._on_applied)
        self.raft.start_watch()
        self.voting = VotingCore(self.raft, self.voters_target,
                                 self.conf["raft.voter-replace-after"],
                                 self.conf["rest.write-timeout"], self._rest_url_of_node,
                                 self.peer_headers, self.client_ssl)
        self.candidate = VoterCandidate(self.raft)
        self.membership = Membership(self.raft, self.raft_dir, self.conf["rest.write-timeout"],
                                     self.voting)
        app = make_app(self.gateway, self.conf["rest.max-body-size"], token=self.token,
                       peer_credential=peer_credential(self.secret) if self.secret else None,
                       metrics=self.metrics,
                       wait_timeout=self.conf["rest.write-timeout"],
                       hosts=tuple({m.host for m in self.masters} | {
                           self.me.host, self.conf["rest.bind-address"] or self.me.host,
                           socket.gethostname(), socket.getfqdn()}),
                       allowed_hosts=self.conf["rest.allowed-hosts"],
                       allowed_origins=self.conf["rest.allowed-origins"],
                       client_ssl=self.client_ssl)
        app[HEALTH_EXTRA] = [self.janitor.health]  # disk-low in /healthz
        # a stopping peer gives requests in flight (a write waits up to rest.write-timeout
        # for Raft) a few seconds, then cancels them: stopping never waits for clients
        self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=3.0,
                                    keepalive_timeout=self.conf["rest.keepalive-timeout"])
        await self.runner.setup()
        from rest.connlimit import limit_connections  # (kept here: imports are shared)
        # the share of connections kept for peers: those from conf/masters' addresses
        peer_addresses = await _addresses({m.host for m in self.masters})
        limit_connections(self.runner, self.conf["rest.max-connections"],
                          self.conf["rest.max-connections-per-source"],
                          peer_addresses.__contains__)
        site = web.TCPSite(self.runner, self.conf["rest.bind-address"] or self.me.host,
                           self.me.rest_port, ssl_context=self.ssl_server,
                           reuse_address=True)
        await site.start()
        await self.executor.start()
        spark_ready_file = os.path.join(self.data_dir, "spark-ready")
        if self.conf["spark.connect.embedded"] and not self.conf["spark.remote"]:
            port = self.conf["spark.connect.port"] or free_port()
            self.spark = SparkConnectServer(
                port, self.conf["spark.master"], self.log_dir, spark_ready_file,
                self.conf["spark.driver.memory"],
                server_conf(self.conf["spark.master"], self.conf.spark_conf,
                            self.conf["spark.connect.cores"]),
                self.conf["spark.log.level"], self.conf["spark.connect.startup-timeout"],
                self._spark_warmup, on_start=lambda pid: self.guard("spark", pid),
                nice=self.conf["jobmanager.executor.nice"],
                on_ready_change=lambda: self.lease and self.lease.now.set(),
                waiting_after=self.conf["spark.executor-wait-warning"],
                on_info=self._spark_info_changed,
                scratch_dir=os.path.join(self.data_dir, SCRATCH),
                env_pass=self.conf["jobmanager.executor.env-pass"], token=self.connect_token)
            self.spark.start()
        self.reporter = make_reporter(self.raft, self.conf["rest.write-timeout"])
        self.reporter.start()
        self.submitter = Batcher(self.raft, SubmitJobs, self.conf["rest.write-timeout"],
                                 retry=False)
        self.submitter.start()
        jobs_executor = SqlJobExecutor(self.executor, self.sql, self.lease_valid)
        env = JobEnv(self.node, self.conf, jobs_executor, self.reporter, self.resolve_pyfiles,
                     self.spark_remote, spark_ready_file if self.spark else None,
                     self.log_dir, self.data_dir, time.time, self.wait_lease, self._commit,
                     self.metrics, spark_conf_dir(self.log_dir, self.conf["spark.log.level"]),
                     lambda: self.spark.info if self.spark else None)
        self.dispatcher = Dispatcher(self.raft, env)
        self.rm = ResourceManager(self.raft, self.conf["heartbeat.timeout"],
                                  self.conf["rest.write-timeout"],
                                  expiration=self.conf["jobstore.expiration-time"],
                                  capacity=self.conf["jobstore.max-capacity"],
                                  placement=self.conf["jobmanager.placement"],
                                  rebalance=RebalanceConfig.from_conf(self.conf),
                                  metrics=self.metrics,
                                  takeover_grace=self.conf["heartbeat.timeout"]
                                  - self.conf["jobmanager.lease-timeout"],
                                  membership=self.membership)
        self.rounds = LeaseRounds(self.raft, self.conf["heartbeat.interval"] / 2,
                                  self.conf["jobmanager.lease-timeout"])
        self.rounds.start()
        self.beats = BeatSender(self.raft, self.node, self.rounds, self._rest_url_of_node,
                                self.peer_headers, self.client_ssl)
        self.lease = Lease(self.raft, self.node, self._registration,
                           lambda now: Heartbeat(self.node, now, self.spark_ready(),
                                                 self.janitor.low),
                           self.conf["heartbeat.interval"], self.conf["jobmanager.lease-timeout"],
                           self.conf["rest.write-timeout"], self.executor, self.dispatcher,
                           send=self.beats.send)
        self._tasks.append(asyncio.create_task(self.lease.run()))
        self._tasks.append(asyncio.create_task(self.lease.watchdog()))
        self._tasks.append(asyncio.create_task(self._watch_membership()))
        self._tasks.append(asyncio.create_task(LoopMonitor(self.metrics.loop_lag.observe).run()))
        self._tasks.append(asyncio.create_task(
            keep_identity(self.raft, self.registered, self.raft_dir, self.node)))
        self.dispatcher.start()
        self.rm.start()
        self.sql.start()
        self.janitor.start(self.raft, lambda: self.registered.is_set())
        self.started = True
        # a snapshot installed replaces every record: the overview's rows are made again
        self.raft.load_hooks.append(
            lambda: self.started and loop.call_soon_threadsafe(self._warm_overview))
        with self.raft.read() as st:  # records replayed at start: their rows made now
            if len(st.ended) >= WARM_AFTER:
                self._warm_overview()
        log.info("peer %s up: REST %s, Raft %s, pid %d", self.node, self.me.url(self.scheme),
                 self.me.raft_addr, os.getpid())

    def _warm_overview(self) -> None:
        """Fill the overview's row cache in the background."""
        if self._warming is None or self._warming.done():
            self._warming = asyncio.ensure_future(self.gateway.lists.warm())

    def _on_applied(self, command: Any, result: Any) -> None:
        # tick thread: this peer was taken out of the cluster; a peer that joins anew
        # replays its old removal too, so the removal is checked once caught up
        if isinstance(command, RetirePeer) and command.node == self.node and result.ok:
            self.raft.loop.call_soon_threadsafe(self._check_removed)
        if self.gateway.lists.note_applied(command, result) and self.started:
            self.raft.loop.call_soon_threadsafe(self._warm_overview)

    def _check_removed(self) -> None:
        if self._removal_check is None or self._removal_check.done():
            self._removal_check = asyncio.ensure_future(self._removal())

    async def _removal(self) -> None:
        """Stop (see _serve) if the state, caught up with what the leader committed, still
        has this peer's tombstone (a peer added again after its removal has not)."""
        deadline = time.monotonic() + 10.0
        while time.monotonic() < deadline and not self.raft.caught_up():
            await asyncio.sleep(0.05)
        with self.raft.read() as st:
            removed = self.node in st.removed
        if removed:
            log.warning("peer %s was removed from the cluster; stopping", self.node)
            self.removed.set()

    async def _watch_membership(self, every: float = 2.0) -> None:
        """A peer cut off from Raft for a while (its lease ran out) asks the other peers
        whether it is still a member: one that was removed without hearing of it (the
        leader dropped it before its removal reached it) stops instead of waiting forever."""
        cut_off = 0
        while True:
            await asyncio.sleep(every)
            cut_off = cut_off + 1 if self.lease is not None and self.lease.expired() else 0
            if cut_off < 2:
                continue
            with self.raft.read() as st:
                urls = [self.url_of(p.host, p.rest_port) for p in st.peers.values()
                        if p.id != self.node]
            urls += [u for m in self.masters if m != self.me
                     and (u := m.url(self.scheme)) not in urls]
            seen = await ask_members(urls, self.peer_headers, ssl=self.client_ssl)
            if seen is not None and self.node not in seen.voters + seen.non_voters:
                log.warning("peer %s is not a member any more (voters: %s); stopping",
                            self.node, ", ".join(seen.voters))
                self.removed.set()
                return

    def forget_raft_data(self) -> None:
        """After a removal: this peer's Raft data belongs to a membership it left; a later
        start at this address must join anew (jm cluster add-peer) or is refused."""
        shutil.rmtree(self.raft_dir, ignore_errors=True)

    @property
    def registered(self) -> asyncio.Event:
        """Set once this incarnation's registration is committed (cleared if declared dead)."""
        return self.lease.registered if self.lease else _NEVER

    def _registration(self) -> RegisterPeer:
        return RegisterPeer(self.node, self.me.host, self.me.rest_port, self.me.raft_port,
                            os.getpid(), self.conf["jobmanager.slots"], time.time(),
                            self.conf["jobmanager.weight"], self.spark_ready())

    def guard(self, name: str, pid: int) -> None:
        """`pid` (the Connect server, the SQL worker) dies with the job processes when the
        lease runs out."""
        self._guarded[name] = pid
        self.executor.guard(list(self._guarded.values()))

    def _spark_info_changed(self, info: dict) -> None:
        """The Connect server's application changed or started or stopped waiting for
        executors: its connect-mode jobs say so."""
        if self.dispatcher is not None:
            for master in list(self.dispatcher.masters.values()):
                master.note_server(info)

    def lease_valid(self) -> bool:
        return self.lease is not None and self.lease.valid()

    async def wait_lease(self) -> None:
        """Return once this peer holds its lease (JobMasters run only once it exists)."""
        if self.lease is not None:
            await self.lease.wait_valid()

    async def _spark_warmup(self, server: SparkConnectServer) -> None:
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
        jp = await self.executor.spawn(params)
        await asyncio.wait_for(jp.exited, self.conf["spark.connect.startup-timeout"])

    async def stop(self, timeout: float = 20.0) -> None:
        """Stop every component in reverse order, each within what is left of `timeout`:
        a component that does not stop in time is logged and left behind, and the
        processes this peer started (zygote and job processes, Spark JVM) are killed by
        pid in any case, so stopping a peer cannot hang."""
        log.info("peer %s stopping", self.node)
        self.started = False  # new writes get 503 at once (another peer takes them)
        deadline = time.monotonic() + timeout
        if self.raft is not None and self.raft.is_leader():
            await _bounded(self._hand_over(), min(deadline, time.monotonic() + 3.0),
                           f"peer {self.node}: handing Raft leadership over")
        for t in self._tasks:
            t.cancel()
        if self._warming is not None:
            self._warming.cancel()
        steps = [("background tasks", lambda: asyncio.gather(*self._tasks,
                                                            return_exceptions=True)),
                 ("janitor", self.janitor.close)]
        if self.rm:
            steps.append(("resource manager", self.rm.close))
        steps.append(("SQL gateway", self.sql.close))
        if self.dispatcher:
            steps.append(("dispatcher", self.dispatcher.close))
        if self.beats:
            steps.append(("heartbeat sender", self.beats.close))
        for name, batcher in (("reporter", self.reporter), ("submitter", self.submitter),
                              ("lease rounds", self.rounds)):
            if batcher:
                steps.append((name, batcher.close))
        steps.append(("executor", self.executor.close))
        if self.spark:
            steps.append(("spark connect server", self.spark.close))
        if self.runner:
            steps.append(("rest server", self.runner.cleanup))
        for name, step in steps:
            await _bounded(step(), deadline, f"peer {self.node}: stopping the {name}")
        self.kill_processes()
        if self.raft:
            await _bounded(_in_thread(self.raft.destroy), deadline,
                           f"peer {self.node}: stopping Raft")
        log.info("peer %s stopped", self.node)

    async def _hand_over(self) -> None:
        """A stopping leader asks a caught-up member to take over at once (Raft's
        TimeoutNow), so the cluster does not wait an election timeout for it."""
        if not await self.raft.transfer_leadership():
            return
        while self.raft.leader() == self.node:
            await asyncio.sleep(0.02)
        log.info("Raft leadership handed over to %s", self.raft.leader())

    def kill_processes(self) -> None:
        """SIGKILL the processes this peer started that are still alive (by pid); the job
        processes die with their zygote (parent-death signal)."""
        worker = self.sql.worker
        for proc in (self.executor.proc, self.spark.proc if self.spark else None,
                     worker.proc if worker else None):
            if proc is not None and proc.returncode is None:
                try:
                    proc.kill()
                except ProcessLookupError:
                    pass

    # ---- job environment --------------------------------------------------------------
    def spark_ready(self) -> bool:
        """Whether jobs started here get a Spark session without waiting for a JVM."""
        return self.spark is None or self.spark.ready.is_set()

    async def _commit(self, command: Any) -> Any:
        return await self.raft.submit(command, self.conf["rest.write-timeout"])

    def spark_remote(self) -> Optional[str]:
        if self.conf["spark.remote"]:
            return self.conf["spark.remote"]
        return self.spark.url if self.spark else None

    async def resolve_pyfiles(self, pyfiles: list[str]) -> list[str]:
        out = []
        for p in pyfiles:
            if not p.startswith("artifact:"):
                if not os.path.exists(p):
                    raise LookupError(f"pyfile {p} does not exist on peer {self.node}")
                out.append(p)
                continue
            art_id = p[len("artifact:"):]
            with self.raft.read() as st:
                art = st.artifacts.get(art_id)
                if art is None:
                    raise LookupError(f"unknown artifact {art_id}")
                name, holders = art.name, list(art.nodes)
                urls = [self.url_of(st.peers[n].host, st.peers[n].rest_port) for n in holders
                        if n in st.peers and n != self.node]
            path = self.blobs.local_path(art_id, name)
            if path is None:
                try:
                    path = await self.blobs.fetch(art_id, name, urls, self.peer_headers,
                                                  ssl=self.client_ssl)
                except LookupError:  # no peer that has it answers: the shared copy
                    path = await asyncio.to_thread(self._blob_from_shared, art_id, name)
                try:  # this peer holds a copy now: others may fetch it from here too
                    await self.raft.submit(AddArtifact(art_id, name, os.path.getsize(path),
                                                       self.node, time.time()),
                                           self.conf["rest.write-timeout"])
                except RaftUnavailable:
                    pass
            out.append(path)
        return out


async def _bounded(aw, deadline: float, what: str) -> None:
    """Await `aw` until the monotonic `deadline` (at least a moment); log what did not end.
    Unlike wait_for, it does not wait for a late step to honour its cancellation."""
    task = asyncio.ensure_future(aw)
    done, _ = await asyncio.wait({task}, timeout=max(0.05, deadline - time.monotonic()))
    if not done:
        task.cancel()
        log.error("%s: not done in time; going on", what)
    elif not task.cancelled() and task.exception() is not None:
        log.error("%s failed: %r", what, task.exception())


def _in_thread(fn) -> asyncio.Future:
    """Run a blocking call in a daemon thread (never the loop's default executor, whose
    shutdown would wait for a call that hangs)."""
    import threading
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def run() -> None:
        try:
            out, err = fn(), None
        except BaseException as exc:  # handed to the loop
            out, err = None, exc
        try:
            loop.call_soon_threadsafe(_settle, fut, out, err)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass
    threading.Thread(target=run, name="jm-blocking", daemon=True).start()
    return fut


def _settle(fut: asyncio.Future, out: Any, err: Optional[BaseException]) -> None:
    if fut.done():
        return
    if err is not None:
        fut.set_exception(err)
    else:
        fut.set_result(out)


class LogFormat(logging.Formatter):
    """One line per event. text: `time level logger: message [job=... epoch=...]`;
    json: one JSON object per line with time, level, logger, node, message, job, epoch."""

    def __init__(self, kind: str, node: str) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")
        self.kind, self.node = kind, node

    def format(self, record: logging.LogRecord) -> str:
        job, epoch = getattr(record, "job", None), getattr(record, "epoch", None)
        if self.kind == "json":
            import json
            out = {"time": self.formatTime(record), "level": record.levelname,
                   "logger": record.name, "node": self.node, "message": record.getMessage()}
            if job is not None:
                out.update(job=job, epoch=epoch)
            if record.exc_info:
                out["traceback"] = self.formatException(record.exc_info)
            return json.dumps(out)
        line = super().format(record)
        return line if job is None else f"{line} [job={job} epoch={epoch}]"


def _setup_logging(level: str, kind: str = "text", node: str = "", max_size: int = 0,
                   max_files: int = 1) -> None:
    # stdout redirected to a file (bin/jobmanager.sh): that file rotates (env.log.max-size)
    handler = peer_log_handler(max_size, max_files) or logging.StreamHandler(sys.stdout)
    handler.setFormatter(LogFormat(kind, node))
    logging.basicConfig(level=getattr(logging, level), handlers=[handler])
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


async def _serve(peer: Peer) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # `kill -USR2 <pid>`: every thread's stack into the peer's log (stderr), as jstack
    faulthandler.register(signal.SIGUSR2, all_threads=True)
    # `kill -USR1 <pid>`: this member's Raft state (raft/node.py describe) into the log
    loop.add_signal_handler(signal.SIGUSR1, lambda: log.warning(
        "%s", peer.raft.describe() if peer.raft else "Raft not started"))
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await peer.start()
        removed = asyncio.create_task(peer.removed.wait())
        removed.add_done_callback(lambda _: stop.set())
        failed = asyncio.create_task(peer.raft.failed.wait())  # fail-stop: raft/journal.py
        failed.add_done_callback(lambda _: stop.set())
        # everything allocated at start-up is long-lived: keep it out of the collector's
        # way, and collect the young generation less often (fewer pauses under load)
        gc.collect()
        gc.freeze()
        gc.set_threshold(10000, 20, 20)
        await stop.wait()
    finally:
        await peer.stop()
        if peer.removed.is_set():
            peer.forget_raft_data()


async def _addresses(hosts: set[str], timeout: float = 2.0) -> set[str]:
    """The addresses these host names resolve to now (in parallel, each given `timeout`
    s: a name that does not resolve yet, a pod not yet up, is left out)."""
    loop = asyncio.get_running_loop()

    async def one(host: str) -> list[str]:
        try:
            infos = await asyncio.wait_for(loop.getaddrinfo(host, None), timeout)
        except (OSError, asyncio.TimeoutError):
            return []
        return [str(info[4][0]) for info in infos]
    found = await asyncio.gather(*(one(h) for h in sorted(hosts)))
    return {a for addresses in found for a in addresses}


def resolve(name: str) -> list[str]:
    """The addresses of a host name ([] if it does not resolve)."""
    try:
        return [ai[4][0] for ai in socket.getaddrinfo(name, None)]
    except OSError:
        return []


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="jobmanager", description="Run one JobManager peer.")
    ap.add_argument("--conf-dir", default=os.environ.get("JM_CONF_DIR", "conf"))
    ap.add_argument("--peer", help="host:rest-port:raft-port (a line of conf/masters, or a "
                                   "member added with jm cluster add-peer)")
    ap.add_argument("-D", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--rejoin", action="store_true",
                    help="this peer's Raft data was lost: catch up before voting again")
    args = ap.parse_args(argv)
    try:
        compat.check()
    except compat.Incompatible as exc:
        print(f"jobmanager: cannot start: {exc}", file=sys.stderr)
        return 2
    try:
        conf = load_config(args.conf_dir, parse_overrides(args.overrides),
                           home=os.environ.get("JM_HOME"))
        masters = read_masters(os.path.join(args.conf_dir, "masters"))
        me = choose_self(masters, args.peer)
        _setup_logging(conf["jobmanager.log.level"], conf["jobmanager.log.format"], me.node_id,
                       conf["env.log.max-size"], conf["env.log.max-files"])
        peer = Peer(conf, me, masters, rejoin=args.rejoin)
    except ConfigError as exc:
        print(f"jobmanager: configuration error: {exc}", file=sys.stderr)
        return 2
    try:
        import uvloop
        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    except ImportError:
        pass
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(_serve(peer))
        if peer.raft is not None and peer.raft.failure:
            print(f"jobmanager: stopped: {peer.raft.failure}", file=sys.stderr)
            return 1  # (a supervisor restarts it: systemd's Restart=on-failure, Kubernetes)
    except ConfigError as exc:  # e.g. not a member of the cluster it should join
        print(f"jobmanager: cannot start: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"jobmanager: cannot start: {exc}", file=sys.stderr)
        return 1
    finally:
        _close_loop(loop, 5.0)
    return 0


def _close_loop(loop: asyncio.AbstractEventLoop, timeout: float) -> None:
    """Like asyncio.run's ending, but bounded: tasks still running after the peer stopped
    are cancelled and given `timeout` seconds; one that ignores its cancellation does not
    keep the process from exiting."""
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        loop.run_until_complete(asyncio.wait(tasks, timeout=timeout))
    try:
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        loop.close()


if __name__ == "__main__":
    sys.exit(main())
