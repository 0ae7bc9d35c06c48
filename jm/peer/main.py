"""The jobmanager process: `python -m jm.peer` (bin/jobmanager.sh, systemd,
Kubernetes) reads the configuration, runs one Peer until SIGTERM, removal or a Raft
journal failure, and stops it."""
from __future__ import annotations

import argparse
import asyncio
import faulthandler
import gc
import logging
import os
import signal
import sys
from typing import Optional

from jm.peer.peer import Peer
from jm.cluster.peerlog import setup_logging
from jm.cluster.members.stopdrain import StopDrainParts, drain_before_stop, end_stop_drain
from jm.config import ConfigError, choose_self, load_config, parse_overrides, read_masters
from jm.runtime.confine import PEER_UMASK
from raft import compat

log = logging.getLogger("jm.cluster.peer")


async def _serve(peer: Peer) -> None:
    stop = asyncio.Event()     # the first SIGTERM/SIGINT, a removal, a journal failure
    hurry = asyncio.Event()    # a second signal: stop at once, drained or not
    signalled = []
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        signalled.append(True)
        if len(signalled) > 1:
            hurry.set()
        stop.set()

    # `kill -USR2 <pid>`: every thread's stack into the peer's log (stderr), as jstack
    faulthandler.register(signal.SIGUSR2, all_threads=True)
    # `kill -USR1 <pid>`: this member's Raft state (raft/node.py describe) into the log
    loop.add_signal_handler(signal.SIGUSR1, lambda: log.warning(
        "%s", peer.parts.raft.describe() if peer.parts else "Raft not started"))
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal)
    undrain: Optional[asyncio.Task] = None
    try:
        await peer.start()
        parts, removed_ev = peer.parts, peer.ground.removed
        drains = StopDrainParts(parts.raft, peer.node, peer.ground.data_dir, parts.term.valid,
                                peer.conf.timeouts.commit)
        # the drain its last stop began ends once it is registered (jm/cluster/members/stopdrain.py)
        undrain = asyncio.create_task(end_stop_drain(drains, parts.registered, removed_ev))
        removed = asyncio.create_task(removed_ev.wait())
        removed.add_done_callback(lambda _: stop.set())
        failed = asyncio.create_task(parts.raft.failed.wait())  # fail-stop: raft/journal.py
        failed.add_done_callback(lambda _: stop.set())
        refused = asyncio.create_task(parts.lease.refused.wait())  # an older protocol
        refused.add_done_callback(lambda _: stop.set())
        # everything allocated at start-up is long-lived: keep it out of the collector's
        # way, and collect the young generation less often (fewer pauses under load)
        gc.collect()
        gc.freeze()
        gc.set_threshold(10000, 20, 20)
        await stop.wait()
        undrain.cancel()
        if signalled and not removed_ev.is_set() and not parts.raft.failed.is_set() \
                and not parts.lease.refused.is_set():
            # told to stop: drain first (jobmanager.stop.drain-deadline), then stop
            await drain_before_stop(drains, peer.conf["jobmanager.stop.drain-deadline"],
                                    peer.conf["jobmanager.cancel-timeout"], hurry)
    finally:
        if undrain is not None:
            undrain.cancel()
        await peer.stop()
        if peer.ground.removed.is_set():
            peer.forget_raft_data()


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="jobmanager", description="Run one JobManager peer.")
    ap.add_argument("--conf-dir", default=os.environ.get("JM_CONF_DIR", "conf"))
    ap.add_argument("--peer", help="host:rest-port:raft-port (a line of conf/masters, or a "
                                   "member added with jm cluster add-peer)")
    ap.add_argument("-D", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--rejoin", action="store_true",
                    help="this peer's Raft data was lost: catch up before voting again")
    args = ap.parse_args(argv)
    # what the peer writes (journal, snapshots, audit, blobs, logs) is its user's alone;
    # the processes that run users' code get USER_UMASK back (jm/runtime/confine.py)
    os.umask(PEER_UMASK)
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
        setup_logging(conf["jobmanager.log.level"], conf["jobmanager.log.format"], me.node_id,
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
        parts = peer.parts
        if parts is not None and parts.raft.failure:
            print(f"jobmanager: stopped: {parts.raft.failure}", file=sys.stderr)
            return 1  # (a supervisor restarts it: systemd's Restart=on-failure, Kubernetes)
        if parts is not None and parts.lease.refusal:
            print(f"jobmanager: cannot start: {parts.lease.refusal}", file=sys.stderr)
            return 2
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
