"""A peer told to stop drains first (jm/policy/members/stopdrain.py decides; this drives it).

jm/peer/main.py runs `drain_before_stop` between the first SIGTERM/SIGINT and `Peer.stop()`:
it commits `DrainPeer(by_stop=True)` with `jobmanager.stop.drain-deadline` (the leader's
drain rounds move the jobs, jm/cluster/members/resourcemanager.py), then waits, woken by every
change of the replicated state, until this peer holds no job or its budget is spent. A
second signal (`hurry`) ends the wait at once. `end_stop_drain` runs in a starting peer:
once registered, it ends the drain its previous stop began (an operator's drain stays).

While the cluster runs a protocol that drops `by_stop` (peers of an older build beside
this one, or `cluster.protocol-version` holding it back: raft/protocol.py), the stop's
drain is recorded as an operator's. The stopping peer then writes a marker
(`stop-drain.json` in its data dir) naming its drain, and its next start ends the drain
the marker names (a plain undrain, as an operator's `jm drain --undo`).
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional

from jm.cluster.jobs.jobfiles import read_json
from jm.policy.members import stopdrain as policy
from jm.policy.members.stopdrain import DRAIN, SKIP, SelfView, StopMarker, StopView
from raft import protocol
from raft.commands import DrainPeer
from raft.outcomes import RaftUnavailable
from raft.records import ALIVE

log = logging.getLogger("jm.cluster.stopdrain")
RECHECK = 1.0  # s: the lease's validity is no state change; looked at this often
MARKER_MAX = 4096  # bytes: a marker is {"deadline": <a number>}
MARKER = "stop-drain.json"  # in the peer's data dir: a stop's drain the record cannot tell


@dataclass(frozen=True)
class StopDrainParts:
    """What a peer's stop drain uses of it: its Raft member (read, leader, subscribe,
    submit), its node id, its data dir (the marker), whether it holds its lease, and the
    commit timeout of its writes."""
    raft: Any
    node: str
    data_dir: str
    lease_valid: Callable[[], bool]
    write_timeout: float


def self_view(st: Any, node: str) -> Optional[SelfView]:
    p = st.peers.get(node)
    if p is None:
        return None
    return SelfView(p.state == ALIVE, p.draining, getattr(p, "drain_by_stop", False),
                    p.leaving, len(st.jobs_of(node)), p.drain_deadline)


def read_marker(data_dir: str) -> Optional[StopMarker]:
    """The marker of this peer's last stop (None: none, or unreadable: also one that is
    no small regular file, a FIFO or /dev/zero put there, which would hang the start or
    run it out of memory)."""
    path = os.path.join(data_dir, MARKER)
    body, refused = read_json(path, MARKER_MAX)
    if refused is not None:
        log.warning("%s %s: ignored", path, refused)
    try:
        deadline = body["deadline"]
        return StopMarker(None if deadline is None else float(deadline))
    except (KeyError, TypeError, ValueError):
        return None


def _write_marker(data_dir: str, deadline: float) -> None:
    path = os.path.join(data_dir, MARKER)
    with open(path + ".tmp", "w") as f:
        json.dump({"deadline": deadline}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)


def _drop_marker(data_dir: str) -> None:
    try:
        os.unlink(os.path.join(data_dir, MARKER))
    except FileNotFoundError:
        pass


def _needs_marker(raft: Any) -> bool:
    """The cluster's protocol drops `DrainPeer.by_stop`: only a marker tells the drain."""
    with raft.read() as st:
        return not protocol.keeps("DrainPeer", "by_stop", st.protocol)


def read_view(peer: StopDrainParts) -> StopView:
    """The stopping peer's view of the replicated state (its local replica)."""
    with peer.raft.read() as st:
        me = self_view(st, peer.node)
        targets = sum(1 for p in st.alive_peers() if p.id != peer.node and p.ready
                      and not p.draining and not p.leaving)
    return StopView(me, peer.raft.leader() is not None, peer.lease_valid(), targets)


async def _unless(work: Awaitable, hurry: asyncio.Event) -> bool:
    """Run `work` unless `hurry` is set first (then cancel it): True if it completed."""
    task = asyncio.ensure_future(work)
    stop = asyncio.ensure_future(hurry.wait())
    try:
        await asyncio.wait({task, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
    if task.done():
        task.result()  # its exception, if any
        return True
    task.cancel()
    return False


async def _either(a: asyncio.Event, b: asyncio.Event, timeout: float) -> None:
    """Until `a` or `b` is set, at most `timeout` s."""
    waits = {asyncio.ensure_future(a.wait()), asyncio.ensure_future(b.wait())}
    try:
        await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()


async def drain_before_stop(peer: StopDrainParts, deadline: float, cancel_timeout: float,
                            hurry: asyncio.Event) -> str:
    """Drain this peer before it stops; return how it ended ("skipped: ...",
    "drained", or why it stops with jobs still on it)."""
    if hurry.is_set():  # (bin/jobmanager.sh stop --no-drain: two signals at once)
        log.info("peer %s stops without draining: a second signal came first", peer.node)
        return "hurried"
    decision = policy.how_to_stop(read_view(peer), deadline)
    if decision.action == SKIP:
        log.info("peer %s stops without draining: %s", peer.node, decision.reason)
        return f"skipped: {decision.reason}"
    started = time.monotonic()
    until = started + policy.wait_budget(deadline, cancel_timeout)
    changed = peer.raft.subscribe()
    if decision.action == DRAIN:
        command = DrainPeer(peer.node, True, time.time(), deadline, by_stop=True)
        if _needs_marker(peer.raft):  # (written first: a drain committed is always marked)
            try:
                await asyncio.to_thread(_write_marker, peer.data_dir, deadline)
            except OSError as exc:
                log.warning("peer %s: cannot mark its stop's drain (%s): it stays drained "
                            "when it starts again, until `jm drain %s --undo`", peer.node,
                            exc, peer.node)
        submit = asyncio.ensure_future(peer.raft.submit(command, peer.write_timeout))
        try:
            if not await _unless(submit, hurry):
                log.warning("peer %s: second signal, stopping at once", peer.node)
                return "hurried"
            res = submit.result()
        except RaftUnavailable as exc:
            log.warning("peer %s stops without draining: the drain was not committed (%s)",
                        peer.node, exc)
            return f"skipped: {exc}"
        if not res.ok:
            log.warning("peer %s stops without draining: %s", peer.node, res.error)
            return f"skipped: {res.error}"
    view = read_view(peer)
    jobs = view.me.jobs if view.me else 0
    log.info("peer %s draining before it stops: %d job(s) to move (%s; deadline %g s, "
             "waiting at most %.0f s)", peer.node, jobs, decision.reason, deadline,
             until - started)
    while True:
        step = policy.progress(view, time.monotonic(), until)
        if step.done:
            if step.reason == "drained":
                log.info("peer %s drained in %.1f s; stopping", peer.node,
                         time.monotonic() - started)
            else:
                log.warning("peer %s stops with %d job(s) still on it: %s", peer.node,
                            step.jobs, step.reason)
            return step.reason
        changed.clear()
        await _either(changed, hurry, max(0.0, min(RECHECK, until - time.monotonic())))
        if hurry.is_set():
            log.warning("peer %s: second signal, stopping at once with %d job(s) on it",
                        peer.node, step.jobs)
            return "hurried"
        view = read_view(peer)


async def end_stop_drain(peer: StopDrainParts, registered: asyncio.Event,
                         removed: asyncio.Event) -> None:
    """Once this (restarted) peer is registered: end the drain its last stop began, so
    that it takes work again (until `removed`). Cancelled when this incarnation is told
    to stop."""
    changed = peer.raft.subscribe()
    marker = read_marker(peer.data_dir)
    while True:
        await registered.wait()
        with peer.raft.read() as st:
            me = self_view(st, peer.node)
        if not policy.should_undrain(me, marker):
            if me is not None and me.draining:
                log.info("peer %s is drained by an operator; it stays drained", peer.node)
            _drop_marker(peer.data_dir)
            return
        try:
            # by_stop: an operator's drain since is left as it is, by the state machine;
            # a drain only the marker tells is ended as an operator ends one
            command = DrainPeer(peer.node, False, time.time(), by_stop=me.by_stop)
            res = await peer.raft.submit(command, peer.write_timeout)
            if res.ok:
                log.info("peer %s: the drain of its last stop ended; it takes work again",
                         peer.node)
                _drop_marker(peer.data_dir)
                return
            log.warning("peer %s: could not end the drain of its last stop: %s", peer.node,
                        res.error)
            return
        except RaftUnavailable as exc:
            log.info("peer %s: ending the drain of its last stop: %s; trying again",
                     peer.node, exc)
        changed.clear()
        await _either(changed, removed, RECHECK)
