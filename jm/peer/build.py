"""A joined peer's components, each given its collaborators by keyword (`build`), and the
few small roles that tie them together: what the replicated state's changes mean for this
peer (`AppliedWatch`), the overview's row cache (`OverviewWarmer`), its registration.
Nothing runs yet: jm/peer/peer.py starts them in order and stops them in reverse."""
from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional

from jm.cluster.api.gateway import PeerGateway, build_gateway
from jm.cluster.api.joblists import JobLists
from jm.cluster.api.services import GatewayServices
from jm.cluster.batcher import Batcher
from jm.cluster.submitroute import GATHER, GATHER_AFTER, SubmitRoute
from jm.cluster.jobs.artifacts import ArtifactFetcher
from jm.cluster.jobs.dispatcher import Dispatcher
from jm.cluster.jobs.envs import EnvCache, PipOptions
from jm.cluster.jobs.jobservices import JobEnv, make_reporter
from jm.cluster.jobs.sqljobs import SqlJobExecutor
from jm.cluster.members.beats import BeatSender, LeaseRounds
from jm.cluster.members.directory import PeerDirectory
from jm.cluster.members.lease import Lease, LeaseTerm
from jm.cluster.members.membership import Membership, RemovalWatch
from jm.cluster.members.osusers import MissingUsers, users_of
from jm.cluster.members.resourcemanager import RebalanceConfig, ResourceManager
from jm.cluster.members.voting import VoterCandidate, VotingCore
from jm.cluster.sql.sessiondeps import SessionDepsHolder
from jm.cluster.sql.sqlgateway import SqlGateway
from jm.cluster.sql.sqlservices import SqlServices
from jm.config import Config, PeerAddress
from jm.peer.ground import Ground
from jm.policy.members.voters import DEFAULT_VOTERS
from jm.runtime.sparkjvm import spark_conf_dir
from raft.commands import Heartbeat, RegisterPeer, RetirePeer, SubmitJobs
from raft.node import RaftHost

if TYPE_CHECKING:
    from jm.cluster.spark.connectfront import ConnectFront


@dataclass(frozen=True)
class Parts:
    raft: RaftHost
    directory: PeerDirectory     # where the other peers answer
    membership: Membership
    voting: VotingCore           # promotions of non-voters (on the leader)
    candidate: VoterCandidate    # this peer becoming a voter
    reporter: Batcher            # job reports, batched into Raft
    submitter: Batcher           # submissions, batched into Raft
    dispatcher: Dispatcher       # this peer's JobMasters
    rm: ResourceManager          # placement and rebalancing (on the leader)
    term: LeaseTerm              # whether this peer holds its lease
    lease: Lease                 # registration and heartbeats
    rounds: LeaseRounds          # the leader's heartbeat rounds
    beats: BeatSender
    removal: RemovalWatch
    sql: SqlGateway
    connect: Optional["ConnectFront"]  # the Spark Connect endpoint (None: not served here)
    lists: JobLists              # the overview's rows
    warmer: "OverviewWarmer"
    gateway: PeerGateway         # what REST may ask

    @property
    def registered(self) -> asyncio.Event:
        """Set once this incarnation's registration is committed (cleared if declared
        dead)."""
        return self.lease.registered


class OverviewWarmer:
    """Fills the overview's row cache in the background (one fill at a time)."""

    def __init__(self, lists: JobLists) -> None:
        self.lists = lists
        self._task: Optional[asyncio.Future] = None

    def warm(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self.lists.warm())

    def cancel(self) -> None:
        if self._task is not None:
            self._task.cancel()


class AppliedWatch:
    """(Raft's tick thread) What an applied command means for this peer: its own removal
    (looked at once caught up: a peer that joins anew replays its old removal too) and the
    overview's rows of jobs that ended."""

    def __init__(self, node: str, raft: RaftHost, removal: RemovalWatch, lists: JobLists,
                 warmer: OverviewWarmer, started: asyncio.Event) -> None:
        self.node, self.raft, self.removal, self.lists = node, raft, removal, lists
        self.warmer, self.started = warmer, started

    def __call__(self, command: Any, result: Any) -> None:
        loop = self.raft.loop
        if isinstance(command, RetirePeer) and command.node == self.node and result.ok:
            loop.call_soon_threadsafe(self.removal.check)
        if self.lists.note_applied(command, result) and self.started.is_set():
            loop.call_soon_threadsafe(self.warmer.warm)


def registration(conf: Config, me: PeerAddress, ready: Callable[[], bool],
                 connect_port: int = 0) -> Callable[[], RegisterPeer]:
    """This incarnation's RegisterPeer, made when the lease (re)registers."""
    return lambda: RegisterPeer(me.node_id, me.host, me.rest_port, me.raft_port, os.getpid(),
                                conf["jobmanager.slots"], time.time(),
                                conf["jobmanager.weight"], ready(),
                                conf["cluster.protocol-version"], connect_port)


def build(*, conf: Config, me: PeerAddress, masters: list[PeerAddress], ground: Ground,
          raft: RaftHost, had_data: bool, connect_port: int = 0) -> Parts:
    """Every component of a joined peer, wired to its collaborators (nothing runs yet)."""
    t, node, sparks, executor = conf.timeouts, ground.node, ground.sparks, ground.executor
    directory = PeerDirectory(raft, ground.scheme, me, masters)
    voting = VotingCore(raft, conf["raft.voters"] or DEFAULT_VOTERS,
                        conf["raft.voter-replace-after"], t.commit, directory.url_of_node,
                        ground.peer_client)
    membership = Membership(raft, ground.raft_dir, t.commit, voting)
    beat_now = asyncio.Event()  # a change the next heartbeat tells: sent at once
    sparks.build(executor, ground.guards.guard, on_ready_change=beat_now.set,
                 unguard=ground.guards.unguard)
    fetcher = ArtifactFetcher(node, raft, ground.blobs, ground.ha_blobs, ground.peer_client,
                              directory.url_of, t.write)
    envs = EnvCache(os.path.join(ground.data_dir, "envs"), conf["jobmanager.envs.max-size"],
                    PipOptions.from_conf(conf))  # jobs' and sessions' Python
    term = LeaseTerm(t.lease)
    sql = SqlGateway(SqlServices(
        node, conf, raft, term.valid, sparks.engines, directory.url_of, ground.log_dir,
        ground.guards.guard, sparks.child_env,
        SessionDepsHolder(fetcher.resolve_pyfiles, envs,
                          os.path.join(ground.data_dir, "session-files"))))
    sparks.engines.on_stopped.append(  # an engine stopped for good: its SQL worker too
        lambda key, server: asyncio.ensure_future(sql.host.workers.drop(server.url)))
    reporter = make_reporter(raft, t.commit)
    env = JobEnv(node=node, conf=conf,
                 executor=SqlJobExecutor(executor, sql.host.workers, sparks.engines,
                                         term.valid),
                 reporter=reporter, resolve_pyfiles=fetcher.resolve_pyfiles,
                 spark_remote=sparks.remote, spark_ready_file=sparks.ready_file,
                 log_dir=ground.log_dir, work_dir=ground.data_dir, clock=time.time,
                 wait_lease=term.wait_valid,
                 commit=lambda command: raft.submit(command, t.commit),
                 metrics=ground.metrics,
                 spark_conf_dir=spark_conf_dir(ground.log_dir, conf.spark.log_level),
                 spark_info=sparks.info, engines=sparks.engines, envs=envs)
    dispatcher = Dispatcher(raft, env)
    sparks.on_info.append(dispatcher.note_engine_info)
    sparks.engines.on_lost.append(dispatcher.lose_engine)
    rm = ResourceManager(raft, t.heartbeat, t.commit,
                         expiration=conf["jobstore.expiration-time"],
                         capacity=conf["jobstore.max-capacity"],
                         placement=conf["jobmanager.placement"],
                         rebalance=RebalanceConfig.from_conf(conf), metrics=ground.metrics,
                         takeover_grace=t.heartbeat - t.lease, membership=membership)
    rounds = LeaseRounds(raft, t.interval / 2, t.lease)
    missing_users = MissingUsers(users_of(raft.read))  # (Heartbeat.lacks)
    beats = BeatSender(raft, node, rounds, directory.url_of_node, ground.peer_client)
    lease = Lease(raft, node, registration(conf, me, sparks.ready, connect_port),
                  lambda now: Heartbeat(node, now, sparks.ready(), ground.janitor.low,
                                        missing_users()),
                  t.interval, t.lease, t.commit, executor, dispatcher,
                  send=beats.send, now=beat_now, term=term)
    removal = RemovalWatch(node, raft, term.expired, ground.peer_client,
                           directory.other_urls, ground.removed)
    lists = JobLists(raft.read)
    candidate = VoterCandidate(raft)
    submitter = Batcher(raft, SubmitJobs, t.write, retry=False,  # (clients wait)
                        gather=GATHER, gather_after=GATHER_AFTER)
    gateway = build_gateway(GatewayServices(
        node=node, conf=conf, raft=raft, lease=lease, rounds=rounds,
        submitter=SubmitRoute(raft, submitter, t.write),
        executor=executor, sql=sql, spark=sparks.server, spark_remote=sparks.remote,
        blobs=ground.blobs, shared_blobs=ground.ha_blobs, voting=voting, candidate=candidate,
        peer_client=ground.peer_client, url_of=directory.url_of, lists=lists,
        data_dir=ground.data_dir, log_dir=ground.log_dir, disk_low=ground.janitor.disk_low,
        started=ground.started.is_set, had_data=had_data, engines=sparks.engines))
    ground.metrics.add_gauges(gateway.health.gauges)
    raft.write_observers.append(ground.metrics.observe_write)
    connect = None
    if connect_port:  # (gRPC is imported only by a peer that serves Connect clients)
        from jm.cluster.spark.connectfront import ConnectFront, FrontSettings
        connect = ConnectFront(FrontSettings(
            node=node, root_token=ground.token,
            idle_timeout=conf["sql-gateway.session.idle-timeout"],
            max_sessions=conf["spark.connect.endpoint.max-sessions"],
            engine_wait=conf.spark.startup_timeout, write_timeout=t.write),
            raft, sparks.engines, gateway.tokens.credential, term.valid)
    warmer = OverviewWarmer(lists)
    raft.apply_hooks.append(AppliedWatch(node, raft, removal, lists, warmer, ground.started))
    return Parts(raft=raft, directory=directory, membership=membership, voting=voting,
                 candidate=candidate, reporter=reporter, submitter=submitter,
                 dispatcher=dispatcher, rm=rm, term=term, lease=lease, rounds=rounds,
                 beats=beats, removal=removal, sql=sql, connect=connect, lists=lists,
                 warmer=warmer, gateway=gateway)
