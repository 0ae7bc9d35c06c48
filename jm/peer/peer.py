"""One JobManager peer: wires Raft, REST, Dispatcher, ResourceManager, executor and
Spark together, starts them in order and stops them in reverse order.

Run as `python -m jm.peer --conf-dir conf [--peer host:rest:raft] [-D key=value ...]`.
"""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from typing import Any, Optional

from aiohttp import web

from jm.cluster.jobs.artifacts import ArtifactFetcher
from jm.cluster.batcher import Batcher
from jm.cluster.blobs import BlobStore
from jm.cluster.jobs.dispatcher import Dispatcher
from jm.cluster.api.gateway import PeerGateway, build_gateway
from jm.cluster.jobs.janitor import Janitor, JanitorConfig
from jm.cluster.sql.sessiondeps import SessionDepsHolder
from jm.cluster.jobs.envs import EnvCache, PipOptions
from jm.cluster.jobs.jobservices import JobEnv, make_reporter
from jm.cluster.members.lease import Lease
from jm.cluster import tls
from jm.cluster.members.identity import amnesia_guard, early_answer, keep_identity, serve_early
from jm.cluster.api.joblists import WARM_AFTER
from jm.cluster.members.voting import VoterCandidate, VotingCore
from jm.cluster.waits import bounded, in_thread
from jm.cluster.members.membership import (Membership, RemovalWatch, has_raft_data,
                                           initial_members, raft_settings)
from jm.cluster.members.beats import BeatSender, LeaseRounds
from jm.cluster.api.joblists import JobLists
from jm.cluster.members.osusers import MissingUsers, users_of
from jm.cluster.peerclient import PeerClient
from jm.cluster.api.services import GatewayServices
from jm.cluster.sql.sqlservices import SqlServices
from jm.cluster.looplag import LoopMonitor
from jm.cluster.metrics import PeerMetrics
from jm.cluster.members.resourcemanager import RebalanceConfig, ResourceManager
from jm.config import Config, ConfigError, PeerAddress, rest_base_url
from jm.policy.spark.enginedeath import OomSuspects
from jm.policy.spark.engines import EngineKey
from jm.policy.members.identity import NON_VOTER
from jm.policy.members.voters import DEFAULT_VOTERS, NON_VOTING, VotersError, voter_count
from jm.policy.members.security import peer_credential
from jm.runtime.executor import Executor
from jm.runtime.confine import passable
from jm.runtime.limits import from_conf as job_limits
from jm.cluster.sql.sqlgateway import SqlGateway
from jm.cluster.jobs.sqljobs import SqlJobExecutor
from jm.peer.restserve import check_exposure, serve_rest
from jm.cluster.spark.sparkaccess import SparkAccess
from jm.runtime.sparkjvm import spark_conf_dir
from jm.runtime.sparkserver import SparkConnectServer
from raft.commands import Heartbeat, RegisterPeer, RetirePeer, SubmitJobs
from raft.node import RaftHost
from rest.app import auth_middleware

log = logging.getLogger("jm.cluster.peer")
_NEVER = asyncio.Event()  # `registered` before the lease loop exists


class Peer:
    """A JobManager peer: builds, starts and stops its components."""

    # the components made once it joined (Peer.start: _join, _build, serve): None before
    raft: Optional[RaftHost] = None
    membership: Optional[Membership] = None
    voting: Optional[VotingCore] = None        # promotions (jm/cluster/members/voting.py)
    candidate: Optional[VoterCandidate] = None  # this peer becoming a voter
    runner: Optional[web.AppRunner] = None
    reporter: Optional[Batcher] = None
    submitter: Optional[Batcher] = None
    dispatcher: Optional[Dispatcher] = None
    rm: Optional[ResourceManager] = None
    lease: Optional[Lease] = None
    rounds: Optional[LeaseRounds] = None       # the leader's heartbeat rounds
    beats: Optional[BeatSender] = None
    sql: Optional[SqlGateway] = None
    gateway: Optional[PeerGateway] = None      # what REST may ask
    had_data = False                           # it started with Raft data

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
        check_exposure(conf, me, self.token, self.secret)  # before anything is on disk
        self.data_dir = os.path.join(conf.path("jobmanager.data-dir"), self.node.replace(":", "_"))
        self.log_dir = os.path.join(conf.path("env.log.dir"), self.node.replace(":", "_"))
        self.blobs = BlobStore(os.path.join(self.data_dir, "blobs"))
        # a durable copy of every upload, where every peer can read it
        self.ha_blobs = BlobStore(os.path.join(conf.path("high-availability.storageDir"),
                                               "blobs"))
        # deletes what nothing needs, caps job logs, watches free space
        self.janitor = Janitor(JanitorConfig.from_conf(conf, self.data_dir, self.log_dir),
                               self.blobs, self.node, self.ha_blobs)
        self.raft_dir = os.path.join(self.data_dir, "raft")
        # set when this peer was removed from the cluster: the process stops (_serve)
        self.removed = asyncio.Event()
        # the Connect server, its token (in every child's environment) and URL
        self.sparks = SparkAccess(conf, self.node, self.data_dir, self.log_dir)
        self.executor = Executor(self.log_dir, conf["jobmanager.executor.preload"],
                                 conf["jobmanager.executor.nice"], job_limits(conf),
                                 conf["jobmanager.executor.cgroup"],
                                 env_pass=conf["jobmanager.executor.env-pass"],
                                 env_add=self.sparks.child_env)
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
        self.peer_client = PeerClient(self.peer_headers, self.client_ssl)  # to other peers
        # the overview's rows, made as jobs end (the gateway pages them)
        self.lists = JobLists(lambda: self.raft.read())
        self.metrics = PeerMetrics(self.node, self._gauges)  # a registry per peer

    def url_of(self, host: str, rest_port: int) -> str:
        """The REST base URL of a peer (https with rest.ssl.enabled)."""
        return rest_base_url(self.scheme, host, rest_port)

    def _rest_url_of_node(self, node: str) -> Optional[str]:
        with self.raft.read() as st:
            p = st.peers.get(node)
            return self.url_of(p.host, p.rest_port) if p is not None else None

    # ---- lifecycle ----------------------------------------------------------------------
    async def start(self) -> None:
        """Join (or form) the cluster, build every component, serve REST, run them."""
        for d in (self.data_dir, self.log_dir, os.path.join(self.data_dir, "jobs")):
            os.makedirs(d, exist_ok=True)
        # the way (x, not r) to the folders given to job and engine users below them (the
        # job processes open the way to their checkpoints in high-availability.storageDir)
        for d in (os.path.dirname(self.data_dir), self.data_dir, os.path.join(
                self.data_dir, "jobs"), os.path.dirname(self.log_dir), self.log_dir):
            passable(d)
        os.makedirs(self.raft_dir, mode=0o700, exist_ok=True)
        # the journal, snapshots and identity (every tenant's specs, SQL and code) are the
        # peer's alone: job processes may run as other users of this host
        os.chmod(self.raft_dir, 0o700)
        await self._join()
        self._build()
        self.runner = await serve_rest(
            self.gateway, self.conf, self.me, self.masters, self.token,
            peer_credential(self.secret) if self.secret else None, self.metrics,
            self.client_ssl, self.ssl_server, self.janitor.health)
        await self._run()
        log.info("peer %s up: REST %s, Raft %s, pid %d", self.node, self.me.url(self.scheme),
                 self.me.raft_addr, os.getpid())

    async def _join(self) -> None:
        """This peer's role and the voters (asked of the seeds), then its Raft node."""
        had_data = self.had_data = has_raft_data(self.raft_dir)
        # until the REST app binds, the port answers who this peer is (a new cluster's
        # starting peers find each other: jm/policy/members/identity.py)
        early = await serve_early(
            self.conf["rest.bind-address"] or self.me.host, self.me.rest_port,
            self.ssl_server, early_answer(had_data, self.raft_dir, self.node),
            auth_middleware(self.token, peer_credential(self.secret) if self.secret else None))
        try:
            role, members = await initial_members(self.me, self.masters, self.raft_dir,
                                                  self.peer_client, self.voters, self.scheme)
            # (for every role: a non-voter keeps no log, but a data dir of another peer or
            # cluster is an operator's mistake all the same, and it may be promoted)
            mode = await amnesia_guard(
                had_data, self.raft_dir, self.node,
                [m.url(self.scheme) for m in self.masters if m != self.me],
                self.peer_client, self.rejoin, self.conf["cluster.seed-wait"])
        finally:
            await early.cleanup()
        others = [m for m in members if m != self.me.raft_addr]
        self.raft = RaftHost(self.me.raft_addr, others, self.raft_dir,
                             raft_settings(self.conf), asyncio.get_running_loop(), {},
                             no_vote=mode == NON_VOTER, voter=role != NON_VOTING)
        log.info("peer %s starts as a %s (voters: %s)", self.node,
                 "voter" if role != NON_VOTING else "non-voting member", ", ".join(members))
        self.raft.apply_hooks.append(self._on_applied)
        self.raft.start_watch()

    def _build(self) -> None:
        """Every component, wired to its collaborators (nothing runs yet)."""
        conf, raft, t = self.conf, self.raft, self.conf.timeouts
        self.voting = VotingCore(raft, self.voters_target, conf["raft.voter-replace-after"],
                                 t.commit, self._rest_url_of_node,
                                 self.peer_client)
        self.candidate = VoterCandidate(raft)
        self.membership = Membership(raft, self.raft_dir, t.commit,
                                     self.voting)
        sparks = self.sparks
        beat_now = asyncio.Event()  # a change the next heartbeat tells: sent at once
        sparks.build(self.executor, self.guard, on_ready_change=beat_now.set,
                     on_info=self._spark_info_changed, unguard=self.unguard)
        fetcher = ArtifactFetcher(self.node, raft, self.blobs, self.ha_blobs, self.peer_client,
                                  self.url_of, conf["rest.write-timeout"])
        envs = EnvCache(os.path.join(self.data_dir, "envs"), conf["jobmanager.envs.max-size"],
                        PipOptions.from_conf(conf))  # jobs' and sessions' Python
        self.sql = SqlGateway(SqlServices(
            self.node, conf, raft, self.lease_valid, sparks.engines,
            self.url_of, self.log_dir, self.guard, sparks.child_env,
            SessionDepsHolder(fetcher.resolve_pyfiles, envs,
                              os.path.join(self.data_dir, "session-files"))))
        sparks.engines.on_lost.append(self._engine_lost)
        sparks.engines.on_stopped.append(  # an engine stopped for good: its SQL worker too
            lambda key, server: asyncio.ensure_future(self.sql.host.workers.drop(server.url)))
        self.reporter = make_reporter(raft, t.commit)
        self.submitter = Batcher(raft, SubmitJobs, t.write, retry=False)  # (clients wait)
        jobs_executor = SqlJobExecutor(self.executor, self.sql.host.workers, sparks.engines,
                                       self.lease_valid)
        env = JobEnv(node=self.node, conf=conf, executor=jobs_executor,
                     reporter=self.reporter, resolve_pyfiles=fetcher.resolve_pyfiles,
                     spark_remote=sparks.remote, spark_ready_file=sparks.ready_file,
                     log_dir=self.log_dir, work_dir=self.data_dir, clock=time.time,
                     wait_lease=self.wait_lease, commit=self._commit, metrics=self.metrics,
                     spark_conf_dir=spark_conf_dir(self.log_dir, conf["spark.log.level"]),
                     spark_info=sparks.info, engines=sparks.engines, envs=envs)
        self.dispatcher = Dispatcher(raft, env)
        self.rm = ResourceManager(raft, t.heartbeat, t.commit,
                                  expiration=conf["jobstore.expiration-time"],
                                  capacity=conf["jobstore.max-capacity"],
                                  placement=conf["jobmanager.placement"],
                                  rebalance=RebalanceConfig.from_conf(conf),
                                  metrics=self.metrics,
                                  takeover_grace=t.heartbeat - t.lease,
                                  membership=self.membership)
        self.rounds = LeaseRounds(raft, t.interval / 2, t.lease)
        missing_users = MissingUsers(users_of(raft.read))  # (Heartbeat.lacks)
        self.beats = BeatSender(raft, self.node, self.rounds, self._rest_url_of_node,
                                self.peer_client)
        self.lease = Lease(raft, self.node, self._registration,
                           lambda now: Heartbeat(self.node, now, sparks.ready(),
                                                 self.janitor.low, missing_users()),
                           t.interval, t.lease,
                           t.commit, self.executor, self.dispatcher,
                           send=self.beats.send, now=beat_now)
        self.removal = RemovalWatch(self.node, raft, self.lease.expired, self.peer_client,
                                    self._other_urls, self.removed)
        self.gateway = build_gateway(GatewayServices(
            node=self.node, conf=conf, raft=raft, lease=self.lease, rounds=self.rounds,
            submitter=self.submitter, executor=self.executor, sql=self.sql,
            spark=sparks.server, spark_remote=sparks.remote, blobs=self.blobs,
            shared_blobs=self.ha_blobs, voting=self.voting, candidate=self.candidate,
            peer_client=self.peer_client, url_of=self.url_of, lists=self.lists,
            data_dir=self.data_dir, log_dir=self.log_dir, disk_low=self.janitor.disk_low,
            started=lambda: self.started, had_data=self.had_data, engines=sparks.engines))

    async def _run(self) -> None:
        """Start the components, in the order they need each other."""
        loop = asyncio.get_running_loop()
        await self.executor.start()
        self.sparks.engines.start()
        for component in (self.reporter, self.submitter, self.rounds):
            component.start()
        for work in (self.lease.run(), self.lease.watchdog(), self.removal.watch(),
                     LoopMonitor(self.metrics.loop_lag.observe).run(),
                     keep_identity(self.raft, self.registered, self.raft_dir, self.node)):
            self._tasks.append(asyncio.create_task(work))
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

    def _gauges(self) -> dict:
        return self.gateway.health.gauges() if self.gateway is not None else {}

    def _warm_overview(self) -> None:
        """Fill the overview's row cache in the background."""
        if self._warming is None or self._warming.done():
            self._warming = asyncio.ensure_future(self.lists.warm())

    def _on_applied(self, command: Any, result: Any) -> None:
        # tick thread: this peer was taken out of the cluster; a peer that joins anew
        # replays its old removal too, so the removal is checked once caught up
        if isinstance(command, RetirePeer) and command.node == self.node and result.ok:
            self.raft.loop.call_soon_threadsafe(lambda: self.removal.check())
        if self.lists.note_applied(command, result) and self.started:
            self.raft.loop.call_soon_threadsafe(self._warm_overview)

    def _other_urls(self) -> list[str]:
        """The REST URLs of the other peers: registered ones, then conf/masters'."""
        with self.raft.read() as st:
            urls = [self.url_of(p.host, p.rest_port) for p in st.peers.values()
                    if p.id != self.node]
        return urls + [u for m in self.masters if m != self.me
                       and (u := m.url(self.scheme)) not in urls]

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
                            self.conf["jobmanager.weight"], self.sparks.ready(),
                            self.conf["cluster.protocol-version"])

    def guard(self, name: str, pid: int) -> None:
        """`pid` (an engine, the SQL worker) dies with the job processes when the lease
        runs out."""
        self._guarded[name] = pid
        self.executor.guard(list(self._guarded.values()))

    def unguard(self, name: str) -> None:
        """`name` was stopped for good (an idle engine): its pid is no longer ours."""
        if self._guarded.pop(name, None) is not None:
            self.executor.guard(list(self._guarded.values()))

    def _spark_info_changed(self, key: EngineKey, info: dict) -> None:
        """An engine's application changed or started or stopped waiting for executors:
        the connect-mode jobs on it say so."""
        if self.dispatcher is not None:
            for master in list(self.dispatcher.masters.values()):
                if master.engine_key == key:
                    master.note_server(info)

    def _engine_lost(self, key: EngineKey, why: str, suspects: OomSuspects) -> None:
        """An engine's JVM died: the jobs on it (and only those) lose their attempt; those
        whose work ran it out of memory are told so (jm/cluster/jobs/jobengine.py)."""
        if self.dispatcher is not None:
            for master in list(self.dispatcher.masters.values()):
                if master.engine_key == key:
                    master.lose_engine(why, suspects)

    def lease_valid(self) -> bool:
        return self.lease is not None and self.lease.valid()

    async def wait_lease(self) -> None:
        """Return once this peer holds its lease (JobMasters run only once it exists)."""
        if self.lease is not None:
            await self.lease.wait_valid()

    async def stop(self, timeout: float = 20.0) -> None:
        """Stop every component in reverse order, each within what is left of `timeout`:
        a component that does not stop in time is logged and left behind, and the
        processes this peer started (zygote and job processes, Spark JVM) are killed by
        pid in any case, so stopping a peer cannot hang."""
        log.info("peer %s stopping", self.node)
        self.started = False  # new writes get 503 at once (another peer takes them)
        deadline = time.monotonic() + timeout
        if self.raft is not None:
            # out of elections from now on: it can neither depose the leader the others
            # elect nor be elected and stop under them (raft/leaving.py)
            self.raft.leave_elections()
            if self.raft.is_leader():
                await bounded(self._hand_over(min(3.0, timeout / 2)), deadline,
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
        if self.sql:
            steps.append(("SQL gateway", self.sql.close))
        if self.dispatcher:
            steps.append(("dispatcher", self.dispatcher.close))
        for name, batcher in (("reporter", self.reporter), ("submitter", self.submitter),
                              ("lease rounds", self.rounds)):
            if batcher:
                steps.append((name, batcher.close))
        steps.append(("executor", self.executor.close))
        if self.sparks.engines is not None:
            steps.append(("Spark engines", self.sparks.engines.close))
        if self.runner:
            steps.append(("rest server", self.runner.cleanup))
        steps.append(("client of the other peers", self.peer_client.close))
        for name, step in steps:
            await bounded(step(), deadline, f"peer {self.node}: stopping the {name}")
        self.kill_processes()
        if self.raft:
            await bounded(in_thread(self.raft.destroy), deadline,
                          f"peer {self.node}: stopping Raft")
        log.info("peer %s stopped", self.node)

    async def _hand_over(self, timeout: float) -> None:
        """A stopping leader has a caught-up member take over at once (Raft's
        TimeoutNow, its log held meanwhile), so the cluster neither waits an election
        timeout for it nor lets the peers' leases run out."""
        started = time.monotonic()
        leader = await self.raft.hand_off(timeout)
        if leader is None:
            log.warning("no other member took Raft leadership over (none that is not "
                        "stopping too, or none within %.1f s)", timeout)
        else:
            log.info("Raft leadership handed over to %s in %.2f s", leader,
                     time.monotonic() - started)

    def kill_processes(self) -> None:
        """SIGKILL the processes this peer started that are still alive (by pid); the job
        processes die with their zygote (parent-death signal)."""
        workers = self.sql.host.workers.values() if self.sql else ()
        engines = self.sparks.engines.servers.values() if self.sparks.engines else ()
        for proc in (self.executor.proc, *(e.proc for e in engines),
                     *(w.proc for w in workers)):
            if proc is not None and proc.returncode is None:
                try:
                    proc.kill()
                except ProcessLookupError:
                    pass

    @property
    def spark(self) -> Optional[SparkConnectServer]:
        """The embedded Spark Connect server (None: spark.remote, or none at all)."""
        return self.sparks.server

    async def _commit(self, command: Any) -> Any:
        return await self.raft.submit(command, self.conf.timeouts.commit)

