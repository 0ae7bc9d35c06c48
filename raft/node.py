"""The pysyncobj node that hosts ClusterState, bridged into asyncio.

pysyncobj runs its own tick thread; every callback arrives there. This module
keeps the tick thread's work tiny (decode, apply, signal) and hands results to
the asyncio loop with `call_soon_threadsafe`. Reads from asyncio code take the
state lock, which apply holds while it mutates.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from dataclasses import dataclass
from typing import Any, Callable, Optional

from pysyncobj import FAIL_REASON, SyncObjConsumer, replicated

from raft.commands import Barrier, decode, encode
from raft.journal import DurableJournal
from raft.promotion import RETIRE_AFTER, Handover, forget_journal, make_syncobj
from raft.snapshots import SnapshotStats, stats_of
from raft.state import ClusterState, Result
from raft.transport import WireTransport

log = logging.getLogger("jm.raft")


class RaftUnavailable(Exception):
    """No leader, or the outcome of a write is unknown; the client may retry."""


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


class _StateConsumer(SyncObjConsumer):
    def __init__(self, on_applied: Callable[[Any, Any, Result], None],
                 on_loaded: Callable[[Any], None], gate: threading.RLock) -> None:
        # attributes set before SyncObjConsumer.__init__ are not part of snapshots
        self.lock = threading.RLock()
        self.gate = gate  # shared with a promotion's second consumer (raft/promotion.py)
        self.frozen = False  # an abandoned promotion's: applies nothing more
        self.on_applied = on_applied
        self.on_loaded = on_loaded
        super().__init__()
        self.state = ClusterState()

    @replicated
    def apply(self, blob: bytes) -> Result:
        try:
            command = decode(blob)
        except Exception as exc:
            return Result.fail("invalid", f"undecodable command: {exc}")
        with self.gate:
            if self.frozen:
                return _ABANDONED
            with self.lock:
                result = self.state.apply(command)
            try:
                self.on_applied(self, command, result)
            except Exception:  # a notification problem must never stall the log
                log.exception("on_applied failed")
        return result

    def _deserialize(self, data: dict) -> None:
        """A snapshot replaces the state (at start-up, or sent by the leader to a follower
        that fell behind): the commands it holds were never applied here one by one."""
        with self.gate:
            if self.frozen:
                return
            with self.lock:
                super()._deserialize(data)
            try:
                self.on_loaded(self)
            except Exception:
                log.exception("on_loaded failed")


_ABANDONED = Result.fail("abandoned", "the promotion to voter was abandoned")


class RaftHost:
    """One Raft member: replicated ClusterState plus an async write API."""

    def __init__(self, self_addr: str, other_addrs: list[str], data_dir: str,
                 settings: RaftSettings, loop: asyncio.AbstractEventLoop,
                 addr_to_node: dict[str, str], no_vote: bool = False,
                 voter: bool = True) -> None:
        """`no_vote`: a member whose Raft data was lost (jm/policy/identity.py) does not
        vote until it has caught up (raft/amnesia.py). `voter=False`: a non-voting member
        (jm/policy/voters.py), a pysyncobj read-only node connected to the voters
        `other_addrs`: it applies the log, forwards its writes to the leader, listens on
        no Raft port and keeps no journal (a restart gets the leader's snapshot)."""
        self.started_without_vote = no_vote
        self.is_voter = voter
        self.loop = loop
        self.self_addr = self_addr
        self.addr_to_node = dict(addr_to_node)
        self._subscribers: list[asyncio.Event] = []  # each set after any apply (coalesced)
        self.apply_hooks: list[Callable[[Any, Result], None]] = []  # run on the tick thread
        self.load_hooks: list[Callable[[], None]] = []  # after a snapshot load (tick thread)
        self.leader_listeners: list[Callable[[Optional[str]], None]] = []  # leader changes
        self._notify_pending = False
        self._index_waiters: list[tuple[int, asyncio.Future]] = []  # (index, set when applied)
        self._notify_lock = threading.Lock()
        self._last_leader: Optional[str] = None
        self._watch_task: Optional[asyncio.Task] = None
        os.makedirs(data_dir, exist_ok=True)
        self.data_dir, self.settings = data_dir, settings
        self._gate = threading.RLock()
        self._handover: Optional[Handover] = None  # becoming a voter (raft/promotion.py)
        self._retired: Any = None  # the read-only node after the hand-over
        self.failure: Optional[str] = None  # why this member stopped (its journal failed)
        self.failed = asyncio.Event()  # ... set then: the peer stops (fail-stop)
        self.consumer = self._new_consumer()
        self.syncobj = make_syncobj(self_addr, other_addrs, data_dir, settings, self.consumer,
                                    voter, no_vote)
        self._watch_journal(self.syncobj)
        self._transport = self._wire()

    def _watch_journal(self, syncobj: Any) -> None:
        """A failed fsync of the journal stops the member: `failed` is set (from the fsync
        thread) and the peer stops; its restart recovers from its disk."""
        journal = getattr(syncobj, "_SyncObj__raftLog", None)
        if not isinstance(journal, DurableJournal):
            return

        def on_failed(why: str) -> None:
            self.failure = why
            self.loop.call_soon_threadsafe(self.failed.set)
        journal.on_failed = on_failed
        if journal.failed is not None:  # (it failed before the hook was set)
            on_failed(journal.failed)

    def _new_consumer(self) -> _StateConsumer:
        return _StateConsumer(self._on_applied, self._on_loaded, self._gate)

    def _wire(self) -> Optional[WireTransport]:
        transport = getattr(self.syncobj, "_SyncObj__transport", None)
        return transport if isinstance(transport, WireTransport) else None

    # ---- promotion of a non-voting member (raft/promotion.py) ---------------------------
    def begin_voting(self, voters: list[str]) -> None:
        """Start this non-voting member's voting node next to its read-only one; it takes
        over once the leader has added it and it has caught up (ValueError if this is a
        voter already). Idempotent while one is starting."""
        if self.is_voter:
            raise ValueError("this peer is a voter already")
        if self._handover is not None:
            return
        forget_journal(self.data_dir)
        consumer = self._new_consumer()
        syncobj = make_syncobj(self.self_addr, [v for v in voters if v != self.self_addr],
                               self.data_dir, self.settings, consumer, True, True)
        self._watch_journal(syncobj)
        with self._gate:
            self._handover = Handover(consumer, syncobj)
        log.info("becoming a voter: the voting node listens on %s and catches up",
                 self.self_addr)

    def _stop_retired(self, syncobj: Any) -> None:
        with self._gate:
            if self._retired is not syncobj:
                return
            self._retired = None
        syncobj.destroy_synchronous()

    def abandon_voting(self) -> bool:
        """Stop a voting node that has not taken over (False if none, or it took over)."""
        with self._gate:
            handover, self._handover = self._handover, None
        if handover is None:
            return False
        handover.consumer.frozen = True
        handover.stop()
        log.warning("the promotion to voter was abandoned: still a non-voting member")
        return True

    def _hand_over(self, consumer: Any) -> bool:
        """Under the gate, after `consumer` applied or loaded: True if it is the voting
        node's and it took over now (the caller must not notify for this entry, which the
        read-only node notified already, unless it jumped ahead)."""
        handover = self._handover
        ahead = handover.due(consumer, self.consumer) if handover is not None else None
        if ahead is None:
            return False
        old_syncobj = self.syncobj
        self.consumer, self.syncobj = consumer, handover.syncobj
        self.is_voter, self._handover = True, None
        self._transport = self._wire()
        # the read-only node goes on applying, unseen, for a while: writes in flight
        # through it get their results
        self._retired = old_syncobj
        timer = threading.Timer(RETIRE_AFTER, self._stop_retired, (old_syncobj,))
        timer.daemon = True
        timer.start()
        log.warning("this peer is a voter now (applied index %d)", consumer.state.applied)
        if ahead:  # a snapshot brought it past: what listeners hold is older
            self._run_load_hooks()
        self._schedule_notify()
        return True

    # ---- membership (pysyncobj's dynamic membership; the leader makes the changes) -----
    def members(self) -> list[str]:
        """The Raft members as this replica knows them (node ids, this one included)."""
        others = self.syncobj.otherNodes  # a copy, made on the tick thread's data
        own = {self.self_addr} if self.is_voter else set()
        return sorted(own | {getattr(n, "address", str(n)) for n in others})

    def match_index(self, node: str) -> Optional[int]:
        """On the leader: the last log index known to be on `node` (None: not known)."""
        for _ in range(3):  # getStatus iterates dicts the tick thread may be changing
            try:
                return self.syncobj.getStatus().get(f"match_idx_server_{node}")
            except RuntimeError:
                continue
        return None

    def connected(self, node: str) -> bool:
        """On any member: whether its Raft link to `node` is up now."""
        for _ in range(3):  # getStatus iterates dicts the tick thread may be changing
            try:
                return self.syncobj.getStatus().get(f"partner_node_status_server_{node}") == 2
            except RuntimeError:
                continue
        return False

    def commit_index(self) -> int:
        return self.syncobj.raftCommitIndex

    def caught_up(self) -> bool:
        """This replica has applied every entry it knows to be committed (by the leader's
        word too): a member that joins anew has replayed the log up to now."""
        try:  # getStatus iterates dicts the tick thread may be changing
            status = self.syncobj.getStatus()
        except RuntimeError:
            return False
        known = max(status.get("leader_commit_idx") or 0, status.get("commit_idx") or 0)
        return (status.get("last_applied") or 0) >= known

    async def change_member(self, add: bool, node: str, timeout: float) -> None:
        """Add `node` to (or remove it from) the Raft membership; returns once the change
        is committed. MembershipRefused if the leader refused it (another change is not
        committed yet, the node is (not) a member already, or it is the leader itself);
        RaftUnavailable if no leader or not committed in time."""
        if self.syncobj._getLeader() is None:
            raise RaftUnavailable("no Raft leader at the moment")
        fut = self.loop.create_future()

        def done(result: Any, error: int) -> None:
            self.loop.call_soon_threadsafe(_settle, fut, error)

        change = self.syncobj.addNodeToCluster if add else self.syncobj.removeNodeFromCluster
        change(node, callback=done)
        try:
            error = await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise RaftUnavailable("the membership change was not committed in time; its "
                                  "outcome is unknown") from None
        if error == FAIL_REASON.REQUEST_DENIED:
            raise MembershipRefused("the leader refused the change (another one is not "
                                    "committed yet, or it changes nothing)")
        if error != FAIL_REASON.SUCCESS:
            raise RaftUnavailable(f"membership change failed: {_NAMES.get(error, error)}")

    async def transfer_leadership(self, to: Optional[str] = None) -> bool:
        """Ask a caught-up member (`to`, or the most caught-up one) to take over leadership
        (Raft's TimeoutNow). True once the request is sent: poll leader() to see it done."""
        fut = self.loop.create_future()

        def done(result: Any, error: int) -> None:
            self.loop.call_soon_threadsafe(_settle, fut, error)

        try:
            self.syncobj.transferLeadership(to, callback=done)
            error = await asyncio.wait_for(fut, 5.0)
        except Exception as exc:  # an unknown target, or no answer
            log.info("leadership transfer not started: %s", exc)
            return False
        return error == FAIL_REASON.SUCCESS

    def voting(self) -> bool:
        """False on a non-voting member, and while a member whose data was lost catches
        up (raft/amnesia.py)."""
        return self.is_voter and bool(getattr(self.syncobj, "voting", True))

    def readonly_connected(self) -> int:
        """On a voter: how many non-voting members are connected to it now."""
        try:  # getStatus iterates sets the tick thread may be changing
            return int(self.syncobj.getStatus().get("readonly_nodes_count") or 0)
        except RuntimeError:
            return 0

    def disk_trouble(self) -> Optional[str]:
        """What this member's disk refuses now (a full disk holds its Raft), or None."""
        journal = getattr(self.syncobj, "_SyncObj__raftLog", None)
        return journal.trouble if isinstance(journal, DurableJournal) else None

    def journal_stats(self) -> dict:
        """fsyncs of the Raft journal (raft.fsync): how many, entries covered, seconds."""
        journal = getattr(self.syncobj, "_SyncObj__raftLog", None)
        return journal.stats() if isinstance(journal, DurableJournal) else {}

    def snapshot_stats(self) -> SnapshotStats:
        """This member's snapshots: how many, and how long the last one took."""
        return stats_of(self.syncobj)

    # ---- tick-thread side -------------------------------------------------------------
    def _on_loaded(self, consumer: Any) -> None:
        if consumer is not self.consumer:
            self._hand_over(consumer)
            return
        self._run_load_hooks()

    def _run_load_hooks(self) -> None:
        for hook in self.load_hooks:
            hook()

    def _on_applied(self, consumer: Any, command: Any, result: Result) -> None:
        if consumer is not self.consumer:  # the voting node of a promotion: catching up
            self._hand_over(consumer)
            return
        transport = self._transport
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
                     for n, c in list(so._SyncObj__transport._connections.items())}
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
        blob = encode(command)
        deadline = self.loop.time() + timeout
        while True:
            fut = self.loop.create_future()

            def done(result: Any, error: int, fut: asyncio.Future = fut) -> None:
                self.loop.call_soon_threadsafe(_resolve, fut, result, error)

            self.consumer.apply(blob, callback=done)
            try:
                return await asyncio.wait_for(fut, max(0.0, deadline - self.loop.time()))
            except asyncio.TimeoutError:
                raise RaftUnavailable(
                    "the write was not committed in time; its outcome is unknown") from None
            except _NotAppended as exc:
                if not await self._leader_within(deadline):
                    raise RaftUnavailable(f"Raft write failed: {exc}") from None

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
        with self._gate:
            handover, self._handover = self._handover, None
            retired, self._retired = self._retired, None
        for other in (handover.syncobj if handover else None, retired):
            if other is not None:
                other.destroy_synchronous()
        journal = getattr(self.syncobj, "_SyncObj__raftLog", None)
        if isinstance(journal, DurableJournal):
            journal.close_soon()  # a write waiting for a full disk must not hold the stop
        self.syncobj.destroy_synchronous()


class _NotAppended(Exception):
    """pysyncobj refused the write before appending it: nothing was applied."""


class MembershipRefused(Exception):
    """The leader refused a membership change (one is in progress, or it changes nothing)."""


_NAMES = {getattr(FAIL_REASON, n): n for n in dir(FAIL_REASON) if n.isupper()}
_NOT_APPENDED = {getattr(FAIL_REASON, n) for n in ("MISSING_LEADER", "NOT_LEADER", "QUEUE_FULL")
                 if hasattr(FAIL_REASON, n)}


def _settle(fut: asyncio.Future, error: int) -> None:
    if not fut.done():
        fut.set_result(error)


def _resolve(fut: asyncio.Future, result: Any, error: int) -> None:
    if fut.done():
        return
    if error == FAIL_REASON.SUCCESS:
        fut.set_result(result)
    elif error in _NOT_APPENDED:
        fut.set_exception(_NotAppended(_NAMES.get(error, error)))
    else:
        fut.set_exception(RaftUnavailable(f"Raft write failed: {_NAMES.get(error, error)}"))
