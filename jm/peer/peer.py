"""One JobManager peer: it starts (lays its ground, joins the cluster, builds its parts,
serves REST and runs them in the order they need each other) and stops (in reverse).
What it is made of is elsewhere: jm/peer/ground.py (before it joins), jm/peer/joining.py,
jm/peer/build.py (every component, wired by keyword).

Run as `python -m jm.peer --conf-dir conf [--peer host:rest:raft] [-D key=value ...]`.
"""
from __future__ import annotations

import asyncio
import logging
import os
import shutil
import time
from typing import TYPE_CHECKING, Optional

from aiohttp import web

from jm.cluster.api.joblists import WARM_AFTER
from jm.cluster.looplag import LoopMonitor
from jm.cluster.members.identity import keep_identity
from jm.cluster.waits import bounded, in_thread
from jm.config import Config, PeerAddress
from jm.peer.build import Parts, build
from jm.peer.ground import Ground, lay_ground
from jm.peer.joining import join, voters_at_creation
from jm.peer.restserve import check_exposure, serve_rest
from jm.runtime.confine import passable

if TYPE_CHECKING:
    from jm.cluster.spark.connectlisten import Listener

log = logging.getLogger("jm.cluster.peer")


class Peer:
    """A JobManager peer: starts and stops its parts."""

    def __init__(self, conf: Config, me: PeerAddress, masters: list[PeerAddress],
                 rejoin: bool = False) -> None:
        self.conf, self.me, self.masters = conf, me, masters
        self.node = me.node_id
        self.rejoin = rejoin  # --rejoin: its Raft data is lost; no vote until caught up
        self.voters = voters_at_creation(conf, masters)  # (a ConfigError now, not later)
        # safe by default: before anything is on disk
        check_exposure(conf, me, conf.rest_token(), conf["cluster.secret"])
        self.ground: Ground = lay_ground(conf, me)
        self.parts: Optional[Parts] = None  # once it joined (start)
        self.runner: Optional[web.AppRunner] = None  # REST, once it serves
        self.endpoint: Optional["Listener"] = None  # the Spark Connect endpoint, once bound
        self._tasks: list[asyncio.Task] = []

    # ---- start ----------------------------------------------------------------------
    async def start(self) -> None:
        """Join (or form) the cluster, build every component, serve REST, run them."""
        g = self.ground
        for d in (g.data_dir, g.log_dir, os.path.join(g.data_dir, "jobs")):
            os.makedirs(d, exist_ok=True)
        # the way (x, not r) to the folders given to job and engine users below them (the
        # job processes open the way to their checkpoints in high-availability.storageDir)
        for d in (os.path.dirname(g.data_dir), g.data_dir, os.path.join(
                g.data_dir, "jobs"), os.path.dirname(g.log_dir), g.log_dir):
            passable(d)
        os.makedirs(g.raft_dir, mode=0o700, exist_ok=True)
        # the journal, snapshots and identity (every tenant's specs, SQL and code) are the
        # peer's alone: job processes may run as other users of this host
        os.chmod(g.raft_dir, 0o700)
        # bound before it joins: a port that is taken stops the peer (a configuration error)
        if self.conf.spark.serves_connect:  # (gRPC is imported only by a peer that serves)
            from jm.cluster.spark.connectlisten import open_endpoint
            self.endpoint = open_endpoint(self.conf, self.me.host)
        joined = await join(self.conf, self.me, self.masters, g, self.voters, self.rejoin)
        try:
            self.parts = build(conf=self.conf, me=self.me, masters=self.masters, ground=g,
                               raft=joined.raft, had_data=joined.had_data,
                               connect_port=self.endpoint.port if self.endpoint else 0)
        except BaseException:  # (stop() knows only a built peer's Raft member)
            await in_thread(joined.raft.destroy)
            raise
        self.runner = await serve_rest(
            self.parts.gateway, self.conf, self.me, self.masters, g.token, g.credential,
            g.metrics, g.client_ssl, g.ssl_server, g.janitor.health)
        await self._run(self.parts)
        log.info("peer %s up: REST %s, Raft %s, pid %d", self.node, self.me.url(g.scheme),
                 self.me.raft_addr, os.getpid())

    async def _run(self, p: Parts) -> None:
        """Start the components, in the order they need each other."""
        g, loop = self.ground, asyncio.get_running_loop()
        await g.executor.start()
        g.sparks.engines.start()
        for component in (p.reporter, p.submitter, p.rounds):
            component.start()
        for work in (p.lease.run(), p.lease.watchdog(), p.removal.watch(),
                     LoopMonitor(g.metrics.loop_lag.observe).run(),
                     keep_identity(p.raft, p.registered, g.raft_dir, self.node)):
            self._tasks.append(asyncio.create_task(work))
        p.dispatcher.start()
        p.rm.start()
        p.sql.start()
        if p.connect is not None and self.endpoint is not None:
            await self.endpoint.serve(p.connect)
            p.connect.start()
        g.janitor.start(p.raft, p.registered.is_set)
        g.started.set()
        p.removal.check()  # (a removal applied before the watch was there)
        # a snapshot installed replaces every record: the overview's rows are made again
        p.raft.load_hooks.append(
            lambda: g.started.is_set() and loop.call_soon_threadsafe(p.warmer.warm))
        with p.raft.read() as st:  # records replayed at start: their rows made now
            if len(st.ended) >= WARM_AFTER:
                p.warmer.warm()

    # ---- stop -----------------------------------------------------------------------
    async def stop(self, timeout: float = 20.0) -> None:
        """Stop every component in reverse order, each within what is left of `timeout`:
        a component that does not stop in time is logged and left behind, and the
        processes this peer started (zygote and job processes, Spark JVM) are killed by
        pid in any case, so stopping a peer cannot hang."""
        log.info("peer %s stopping", self.node)
        g, p = self.ground, self.parts
        g.started.clear()  # new writes get 503 at once (another peer takes them)
        deadline = time.monotonic() + timeout
        if p is not None:
            # out of elections from now on: it can neither depose the leader the others
            # elect nor be elected and stop under them (raft/leaving.py)
            p.raft.membership.leave_elections()
            if p.raft.is_leader():
                await bounded(self._hand_over(p, min(3.0, timeout / 2)), deadline,
                              f"peer {self.node}: handing Raft leadership over")
        for t in self._tasks:
            t.cancel()
        steps = [("background tasks", lambda: asyncio.gather(*self._tasks,
                                                             return_exceptions=True)),
                 ("janitor", g.janitor.close)]
        if self.endpoint is not None:
            steps.append(("Spark Connect endpoint", self.endpoint.close))
        if p is not None and p.connect is not None:
            steps.append(("Spark Connect sessions", p.connect.close))
        if p is not None:
            p.warmer.cancel()
            steps += [("resource manager", p.rm.close), ("SQL gateway", p.sql.close),
                      ("dispatcher", p.dispatcher.close), ("reporter", p.reporter.close),
                      ("submitter", p.submitter.close), ("lease rounds", p.rounds.close)]
        steps.append(("executor", g.executor.close))
        if g.sparks.engines is not None:
            steps.append(("Spark engines", g.sparks.engines.close))
        if self.runner:
            steps.append(("rest server", self.runner.cleanup))
        steps.append(("client of the other peers", g.peer_client.close))
        for name, step in steps:
            await bounded(step(), deadline, f"peer {self.node}: stopping the {name}")
        self.kill_processes()
        if p is not None:
            await bounded(in_thread(p.raft.destroy), deadline,
                          f"peer {self.node}: stopping Raft")
        log.info("peer %s stopped", self.node)

    async def _hand_over(self, p: Parts, timeout: float) -> None:
        """A stopping leader has a caught-up member take over at once (Raft's
        TimeoutNow, its log held meanwhile), so the cluster neither waits an election
        timeout for it nor lets the peers' leases run out."""
        started = time.monotonic()
        leader = await p.raft.membership.hand_off(timeout)
        if leader is None:
            log.warning("no other member took Raft leadership over (none that is not "
                        "stopping too, or none within %.1f s)", timeout)
        else:
            log.info("Raft leadership handed over to %s in %.2f s", leader,
                     time.monotonic() - started)

    def kill_processes(self) -> None:
        """SIGKILL the processes this peer started that are still alive (by pid); the job
        processes die with their zygote (parent-death signal)."""
        g = self.ground
        workers = self.parts.sql.host.workers.values() if self.parts else ()
        engines = g.sparks.engines.servers.values() if g.sparks.engines else ()
        for proc in (g.executor.proc, *(e.proc for e in engines),
                     *(w.proc for w in workers)):
            if proc is not None and proc.returncode is None:
                try:
                    proc.kill()
                except ProcessLookupError:
                    pass

    def forget_raft_data(self) -> None:
        """After a removal: this peer's Raft data belongs to a membership it left; a later
        start at this address must join anew (jm cluster add-peer) or is refused."""
        shutil.rmtree(self.ground.raft_dir, ignore_errors=True)
