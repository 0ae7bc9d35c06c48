"""The pysyncobj node that hosts ClusterState, bridged into asyncio.

pysyncobj runs its own tick thread; every callback arrives there. This module
keeps the tick thread's work tiny (decode, apply, signal) and hands results to
the asyncio loop with `call_soon_threadsafe`. Reads from asyncio code take the
state lock, which apply holds while it mutates.
The consumer is in raft/consumer.py, the write API's errors in raft/outcomes.py. RaftHost's
roles are objects of their own, reading the node it runs now (raft/current.py):
`membership` (raft/membership.py: members, membership changes, leadership transfer and
hand-off, leaving elections) and `promotion` (raft/handover.py: a non-voting member
becoming a voter).
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from raft import protocol
from raft.commands import Barrier, encode
from raft.consumer import StateConsumer
from raft.current import CurrentNode
from raft.door import journal_of, transport_of
from raft.handover import Promotion, wire_of
from raft.journal import DurableJournal
from raft.membership import Members
from raft.outcomes import MembershipRefused  # noqa: F401  (re-exported: jm/ imports it here)
from raft.outcomes import ProtocolRefused, RaftUnavailable, NotAppended, resolve_future
from raft.promotion import make_syncobj
from raft.relay import Relay
from raft.snapshots import SnapshotStats, stats_of
from raft.state import Result

log = logging.getLogger("jm.raft")


@dataclass
class RaftSettings:
    min_timeout: float = 0.4
    max_timeout: float = 1.4
    append_entries_period: float = 0.05
    leader_fallback_timeout: float = 1.4
    connection_retry_time: float = 0.5
    connection_timeout: float = 3.5
    auto_tick_period: float = 0.01
    use_batch: bool = False
    password: Optional[str] = None
    log_compaction_min_entries: int = 20000
    log_compaction_min_time: float = 600.0
    fsync: bool = True  # raft/journal.py: acknowledged means on disk on a majority
    max_message_size: int = 256 * 1024 * 1024  # raft/transport.py: a frame's cap
    max_connections: int = 0  # inbound Raft connections; 0: 4 per member, at least 16


class RaftHost:
    """One Raft member: replicated ClusterState plus an async write API."""

    def __init__(self, self_addr: str, other_addrs: list[str], data_dir: str,
                 settings: RaftSettings, loop: asyncio.AbstractEventLoop,
                 addr_to_node: dict[str, str], no_vote: bool = False,
                 voter: bool = True) -> None:
        """`no_vote`: a member whose Raft data was lost (jm/policy/members/identity.py) does not
        vote until it has caught up (raft/amnesia.py). `voter=False`: a non-voting member
        (jm/policy/members/voters.py), a pysyncobj read-only node connected to the voters
        `other_addrs`: it applies the log, forwards its writes to the leader, listens on
        no Raft port and keeps no journal (a restart gets the leader's snapshot)."""
        self.started_without_vote = no_vote
        self.loop = loop
        self.self_addr = self_addr
        self.addr_to_node = dict(addr_to_node)
        self._subscribers: list[asyncio.Event] = []  # each set after any apply (coalesced)
        self.apply_hooks: list[Callable[[Any, Result], None]] = []  # run on the tick thread
        self.load_hooks: list[Callable[[], None]] = []  # after a snapshot load (tick thread)
        self.leader_listeners: list[Callable[[Optional[str]], None]] = []  # leader changes
        # each committed write of this peer (`submit`): its command, the seconds from its
        # submission until applied here, and whether this peer led when it was sent (a
        # follower's write goes through the leader: one round trip more)
        self.write_observers: list[Callable[[Any, float, bool], None]] = []
        self._notify_pending = False
        self._index_waiters: list[tuple[int, asyncio.Future]] = []  # (index, set when applied)
        self._notify_lock = threading.Lock()
        self._last_leader: Optional[str] = None
        self._watch_task: Optional[asyncio.Task] = None
        os.makedirs(data_dir, exist_ok=True)
        self.data_dir, self.settings = data_dir, settings
        self._gate = threading.RLock()
        self.failure: Optional[str] = None  # why this member stopped (its journal failed)
        self.failed = asyncio.Event()  # ... set then: the peer stops (fail-stop)
        # the roles and the consumer exist before the node: its tick thread may apply
        # (or load a snapshot) before make_syncobj returns
        self.current = CurrentNode(None, self._new_consumer(), voter, None)
        self.membership = Members(self.current, loop, self_addr, self.addr_to_node,
                                  settings.max_timeout, self.leader, self.is_leader)
        self.promotion = Promotion(self.current, self._gate, self_addr, data_dir, settings,
                                   self._new_consumer, self._take_node, self._took_over)
        # writes relayed to the leader's group commit (raft/relay.py)
        self.relay = Relay(loop, lambda: self.current.syncobj, time.monotonic)
        syncobj = make_syncobj(self_addr, other_addrs, data_dir, settings,
                               self.current.consumer, voter, no_vote)
        with self._gate:
            self.current.syncobj, self.current.transport = syncobj, wire_of(syncobj)
        self._take_node(syncobj)

    # the node it runs now (read-only here: a promotion replaces it)
    @property
    def syncobj(self) -> Any:
        return self.current.syncobj

    @property
    def consumer(self) -> StateConsumer:
        return self.current.consumer

    @property
    def is_voter(self) -> bool:
        return self.current.is_voter

    def _take_node(self, syncobj: Any) -> None:
        """A node this member made (at start, or a promotion's voting node): its ticks
        relay (raft/relay.py); a failed fsync of its journal stops the member: `failed`
        is set (from the fsync thread) and the peer stops; its restart recovers from its
        disk."""
        self.relay.attach(syncobj)
        journal = journal_of(syncobj)
        if not isinstance(journal, DurableJournal):
            return

        def on_failed(why: str) -> None:
            self.failure = why
            self.loop.call_soon_threadsafe(self.failed.set)
        journal.syncer.on_failed = on_failed
        if journal.syncer.failed is not None:  # (it failed before the hook was set)
            on_failed(journal.syncer.failed)

    def _new_consumer(self) -> StateConsumer:
        return StateConsumer(self._on_applied, self._on_loaded, self._gate)

    def disk_trouble(self) -> Optional[str]:
        """What this member's disk refuses now (a full disk holds its Raft), or None."""
        journal = journal_of(self.syncobj)
        return journal.syncer.trouble if isinstance(journal, DurableJournal) else None

    def journal_stats(self) -> dict:
        """fsyncs of the Raft journal (raft.fsync): how many, entries covered, seconds."""
        journal = journal_of(self.syncobj)
        return journal.syncer.stats() if isinstance(journal, DurableJournal) else {}

    def snapshot_stats(self) -> SnapshotStats:
        """This member's snapshots: how many, and how long the last one took."""
        return stats_of(self.syncobj)

    # ---- tick-thread side -------------------------------------------------------------
    def _on_loaded(self, consumer: Any) -> None:
        if consumer is not self.consumer:  # (the consumer holds the gate)
            self.promotion.hand_over(consumer)
            return
        self._run_load_hooks()

    def _took_over(self, ahead: bool) -> None:
        """The voting node of a promotion serves now."""
        if ahead:  # a snapshot brought it past: what listeners hold is older
            self._run_load_hooks()
        self._schedule_notify()

    def _run_load_hooks(self) -> None:
        for hook in self.load_hooks:
            hook()

    def _on_applied(self, consumer: Any, command: Any, result: Result) -> None:
        if consumer is not self.consumer:  # the voting node of a promotion: catching up
            self.promotion.hand_over(consumer)
            return
        transport = self.current.transport
        if transport is not None:  # room for every peer's reader connection
            transport.readers = len(self.consumer.state.peers)
        for hook in self.apply_hooks:
            hook(command, result)
        self._schedule_notify()

    def _schedule_notify(self) -> None:
        with self._notify_lock:
            if self._notify_pending:
                return
            self._notify_pending = True
        try:
            self.loop.call_soon_threadsafe(self._notify)
        except RuntimeError:  # loop closed during shutdown
            pass

    def _notify(self) -> None:
        with self._notify_lock:
            self._notify_pending = False
        self._wake()

    def _wake(self) -> None:
        for ev in self._subscribers:
            ev.set()
        if self._index_waiters:
            applied = self.applied_index()
            keep = []
            for index, fut in self._index_waiters:
                if fut.done():
                    continue
                if index <= applied:
                    fut.set_result(True)
                else:
                    keep.append((index, fut))
            self._index_waiters = keep

    def subscribe(self) -> asyncio.Event:
        """An event set whenever the state may have changed (or leadership moved)."""
        ev = asyncio.Event()
        self._subscribers.append(ev)
        return ev

    # ---- asyncio side -----------------------------------------------------------------
    def start_watch(self) -> None:
        self._watch_task = self.loop.create_task(self._watch())

    async def _watch(self) -> None:
        """Turn leader changes (seen by polling pysyncobj) into events; also wake
        state watchers now and then so that a snapshot load is never missed."""
        last_applied = -1
        while True:
            leader = self.leader()
            if leader != self._last_leader:
                self._last_leader = leader
                for listener in self.leader_listeners:
                    listener(leader)
                self._wake()
            applied = self.consumer.state.applied
            if applied != last_applied:
                last_applied = applied
                self._wake()
            await asyncio.sleep(0.05)

    def applied_index(self) -> int:
        """How many commands this replica has applied. Every replica applies the same log,
        and the count is part of the replicated state (snapshots carry it), so index N
        names the same point of the history on every peer (X-JM-Index)."""
        return self.consumer.state.applied

    def protocol(self) -> int:
        """The protocol the cluster runs as this replica has applied (raft/protocol.py:
        it only goes up, so a write it lets through is applied whole everywhere)."""
        return self.consumer.state.protocol

    async def wait_applied(self, index: int, timeout: float) -> bool:
        """Until this replica has applied `index`; False if not within `timeout` s."""
        if self.applied_index() >= index:
            return True
        fut = self.loop.create_future()
        self._index_waiters.append((index, fut))
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            return self.applied_index() >= index

    async def barrier(self, timeout: float) -> None:
        """Until this replica has applied everything committed before now: one no-op
        through the log (a linearizable read point). RaftUnavailable if no leader."""
        await self.submit(Barrier(), timeout)

    def leader(self) -> Optional[str]:
        """Node id of the current leader, or None."""
        node = self.syncobj._getLeader()
        if node is None:
            return None
        addr = getattr(node, "address", str(node))
        return self.addr_to_node.get(addr, addr)

    def is_leader(self) -> bool:
        return self.syncobj._isLeader()

    def describe(self) -> str:
        """One line on this member's Raft (`kill -USR1` writes it to the peer's log):
        state, term, leader, indices, and each member's connection (the state of its
        socket, whether the session keys are exchanged, bytes waiting to be sent)."""
        so = self.syncobj
        try:
            st = so.getStatus()
            conns = {str(n): {"state": ("disconnected", "connecting", "connected")[c.state]
                              if c.state in (0, 1, 2) else c.state,
                              "keys": bool(c.sendRandKey) if so.encryptor else None,
                              "unsent": c.getSendBufferSize()}
                     for n, c in list(transport_of(so)._connections.items())}
        except (RuntimeError, AttributeError) as exc:  # (the tick thread changed a dict)
            return f"Raft state not readable now: {exc!r}"
        names = {0: "follower", 1: "candidate", 2: "leader"}
        return (f"Raft {names.get(st.get('state'), st.get('state'))} term {st.get('raft_term')}"
                f" leader {self.leader()} log {st.get('log_len')} commit {st.get('commit_idx')}"
                f" applied {st.get('last_applied')} voting {getattr(so, 'voting', True)}"
                f" connections {conns}")

    def term(self) -> int:
        return self.syncobj._getTerm()

    def ready(self) -> bool:
        return self.syncobj.isReady()

    @contextlib.contextmanager
    def read(self):
        """Hold the state lock while reading the replicated state."""
        with self.consumer.lock:
            yield self.consumer.state

    async def submit(self, command: Any, timeout: float = 5.0) -> Result:
        """Replicate a command; return its Result once applied on this peer.

        No known leader: RaftUnavailable at once. A write pysyncobj never appended
        (the leader was lost between our check and its tick: MISSING_LEADER, NOT_LEADER,
        QUEUE_FULL) has a known outcome, not applied, so it is sent again as soon as a
        leader is known, within `timeout`: a short election costs a write some delay,
        not an error. Any other failure, or no commit in time, is RaftUnavailable."""
        if self.syncobj._getLeader() is None:
            raise RaftUnavailable("no Raft leader at the moment")
        why = protocol.refusal(command, self.protocol())
        if why is not None:
            raise ProtocolRefused(why)
        blob = encode(command)
        start = self.loop.time()
        deadline = start + timeout
        led = self.is_leader()
        while True:
            fut = self.loop.create_future()
            consumer = self.consumer

            def done(result: Any, error: int, fut: asyncio.Future = fut,
                     consumer: Any = consumer) -> None:
                # (on the applying node's thread, right after it applied the command: its
                # count names the point of the history the result belongs to)
                at = consumer.state.applied
                self.loop.call_soon_threadsafe(resolve_future, fut, (result, at), error)

            consumer.apply(blob, callback=done)
            try:
                result, at = await asyncio.wait_for(fut, max(0.0, deadline - self.loop.time()))
            except asyncio.TimeoutError:
                raise RaftUnavailable(
                    "the write was not committed in time; its outcome is unknown") from None
            except NotAppended as exc:
                if not await self._leader_within(deadline):
                    raise RaftUnavailable(f"Raft write failed: {exc}") from None
                continue
            # the node that applied it may not be the one this peer serves from: a member
            # promoted to voter hands over to its voting node while the read-only one,
            # retired, still answers the writes sent through it, possibly ahead of the
            # voting node. The answer waits until the serving replica has applied it too,
            # so what the caller does next (a dispatcher unfenced by its registration)
            # sees the state the write produced.
            if self.applied_index() < at:
                await self.wait_applied(at, max(0.0, deadline - self.loop.time()))
            self.observe_write(command, self.loop.time() - start, led)
            return result

    def observe_write(self, command: Any, seconds: float, led: bool) -> None:
        """Tell the write observers (a write of this peer, `led`: as the leader)."""
        for observer in self.write_observers:
            try:
                observer(command, seconds, led)
            except Exception:  # (a metric must never fail a write)
                log.exception("a write observer failed")

    async def _leader_within(self, deadline: float) -> bool:
        """Poll (every 20 ms, at least once: a refused write is never resent at once, so
        a full queue or a stale leader is not hammered) until a leader is known or the
        deadline has passed."""
        while True:
            await asyncio.sleep(0.02)
            if self.loop.time() >= deadline:
                return False
            if self.syncobj._getLeader() is not None:
                return True

    def destroy(self) -> None:
        """Stop the node (blocking: call it from a thread, not the loop)."""
        if self._watch_task is not None:
            try:  # the task belongs to the loop: cancel it there
                self.loop.call_soon_threadsafe(self._watch_task.cancel)
            except RuntimeError:  # the loop is closed already
                pass
        for other in self.promotion.take_nodes():
            other.destroy_synchronous()
        journal = journal_of(self.syncobj)
        if isinstance(journal, DurableJournal):
            journal.syncer.close_soon()  # a write waiting for a full disk must not hold the stop
        self.syncobj.destroy_synchronous()
