"""A Raft member: pysyncobj's SyncObj steered by small parts, each with its own state.

`RaftNode` is the one subclass of pysyncobj's SyncObj (through raft/door.py's named hooks).
Its parts see a message before pysyncobj does and a tick before pysyncobj's tick runs, in
this order, and read the node's state through a `NodeView`:

* `leaving` (raft/leaving.py): a stopping member leaves elections, a leader handing over
  holds its log;
* `catching_up` (raft/amnesia.py): a member whose data was lost does not vote until it
  has caught up;
* `prevote` (raft/prevote.py): no election without a majority of pre-votes; where it says
  no election in a tick, the election deadline is out of pysyncobj's reach for that tick;
* `readers` (raft/fanout.py): how often a leader sends to the non-voting members.

A durable node (raft.fsync: `new_node(durable=True)`) has a DurableJournal and a
SyncingTransport (raft/journal.py): a tick's messages are held and sent after one sync;
pysyncobj's tick ends waiting for socket events, here the tick runs without waiting, its
messages go out, and then the wait (whose handlers' answers are held and sent after one
sync in turn), so that no message waits for the next socket event. It also keeps a journal
that begins before its snapshot (`load_snapshot`), never moves a follower's next index
back for a late answer, and stops for good on an unreadable snapshot (`halted`).

Only pysyncobj's own code version travels in snapshots (`replicate_only_code_version`):
the parts' state is this member's own.
"""
from __future__ import annotations

import logging
import math
import os
import threading
import time
from typing import Any, Optional

from pysyncobj import journal as pj
from pysyncobj import syncobj as ps
from pysyncobj.monotonic import monotonic as monotonic_time

from raft import relay
from raft.amnesia import CatchingUp
from raft.door import (HookedSyncObj, NodeView, journal_of, replicate_only_code_version,
                       transport_of)
from raft.durablefiles import DURABLE_DUMPS
from raft.fanout import LazyReaders
from raft.journal import DurableJournal, SyncingTransport, UnreadableSnapshot
from raft.leaving import Leaving
from raft.prevote import PreVote
from raft.transport import WireTransport

log = logging.getLogger("jm.raft")
_factory_lock = threading.Lock()


class RaftNode(HookedSyncObj):
    def __init__(self, self_addr: Optional[str], other_addrs: list, *, conf: Any,
                 consumers: list, transport_class: type, no_vote: bool = False,
                 durable: bool = False) -> None:
        # the parts exist before pysyncobj's constructor starts the tick thread
        self.view = view = NodeView(self)
        self.leaving = Leaving(view)
        self.catching_up = CatchingUp(view, no_vote)
        self.prevote = PreVote(view)
        self.readers = LazyReaders(view)
        self.durable = durable
        self.halted: Optional[str] = None  # why this member does nothing any more
        super().__init__(self_addr, other_addrs, conf=conf, consumers=consumers,
                         transportClass=transport_class)
        replicate_only_code_version(self)

    @property
    def voting(self) -> bool:
        return self.catching_up.voting

    def note_forwarded(self, node: Any, index: int) -> None:
        self.readers.note_forwarded(node, index)

    # ---- pysyncobj's hooks ---------------------------------------------------------
    def on_message(self, node: Any, message: Any) -> None:
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == relay.MESSAGE:  # (ours alone: pysyncobj knows no such message)
            items, hear = relay.received_items(message), getattr(self, "relay_received", None)
            if items is not None and hear is not None and self.view.is_leader:
                hear(items)
            return
        if not (self.leaving.admit(node, kind) and self.catching_up.admit(kind, message)
                and self.prevote.admit(node, kind, message, monotonic_time())):
            return
        # A follower's answer "I have everything before N" that arrives after more entries
        # went out (answers wait for the follower's fsync) must not move the leader's next
        # index back: pysyncobj would send those entries again, and the follower would
        # drop and rewrite what it already has. Only a reset (the logs differ) moves it.
        keep = None
        if (self.durable and kind == "next_node_idx" and message.get("success")
                and not message.get("reset")):
            keep = self.view.next_index.get(node)
        super().on_message(node, message)
        nxt = self.view.next_index
        if keep is not None and node in nxt and nxt[node] < keep:
            nxt[node] = keep

    def send_entries(self) -> None:
        self.readers.send(super().send_entries, monotonic_time())

    def _checkCommandsToApply(self) -> None:
        if self.leaving.may_append():
            super()._checkCommandsToApply()

    def load_snapshot(self, clear_journal: bool) -> Any:
        """pysyncobj keeps the journal at start-up only if it begins where the snapshot
        ends. A power cut between a snapshot's rename and the journal's compaction leaves a
        journal that begins at the older snapshot: pysyncobj would clear it, and with it
        the entries committed after the new snapshot. Compact it here instead, dropping
        only what the snapshot holds."""
        if self.durable and not clear_journal:
            try:
                data = self.read_snapshot()
            except Exception as exc:  # (pysyncobj calls this when the file exists)
                # pysyncobj would log it and go on from an empty state, replaying the
                # journal's entries after the snapshot onto it: a replica unlike any other
                raise UnreadableSnapshot(
                    f"the Raft snapshot {self.dump_file} cannot be read "
                    f"({type(exc).__name__}: {exc}): this member stops (with its Raft dir "
                    f"{os.path.dirname(self.dump_file)} moved away, it starts without Raft "
                    "data and gets the state from the other members)") from exc
            journal = journal_of(self)
            for k in range(1, len(journal) - 1):
                if journal[k] == data[2] and journal[k + 1] == data[1]:
                    journal.deleteEntriesTo(k)
                    break
        return super().load_snapshot(clear_journal)

    # ---- ticks ---------------------------------------------------------------------
    def _onTick(self, timeToWait: float = 0.0) -> None:
        if self.halted is not None:
            time.sleep(timeToWait or 0.1)  # (the auto-tick thread's pace) until stopped
            return
        try:
            self._tick(timeToWait)
        except UnreadableSnapshot as exc:
            self._halt(str(exc))

    def _halt(self, why: str) -> None:
        """Fail-stop: no more ticks (nothing applied, sent or answered); the journal's
        failure hook tells the peer, which stops saying why."""
        self.halted = why
        journal = journal_of(self)
        if isinstance(journal, DurableJournal):
            journal.syncer.fail(why)
        else:
            log.critical("%s", why)

    def _tick(self, timeToWait: float) -> None:
        transport = transport_of(self)
        if not isinstance(transport, SyncingTransport):
            return self._steered_tick(timeToWait)
        transport.hold()
        try:
            self._steered_tick(0.0)
        finally:
            transport.release()
        if timeToWait > 0:
            transport.hold()
            try:
                self._poller.poll(timeToWait)
            finally:
                transport.release()

    def _steered_tick(self, timeToWait: float) -> None:
        now = monotonic_time()
        self.leaving.tick(now)
        self.catching_up.tick(now)
        if self.prevote.tick(now):
            return super()._onTick(timeToWait)
        # pysyncobj looks at the election timeout again further on in its tick, after work
        # that can take long (its one-second write of the term and commit index, which
        # waits while the disk is full): a timeout passing in between would start an
        # election without a pre-vote, raising this member's term where no one may hear it
        view = self.view
        deadline = view.election_deadline
        view.election_deadline = math.inf
        try:
            super()._onTick(timeToWait)
        finally:  # (unless a handler set it meanwhile: an append-entries, a timeout_now)
            if view.election_deadline == math.inf:
                view.election_deadline = deadline


def new_node(self_addr: Optional[str], other_addrs: list, conf: Any, consumers: list, *,
             durable: bool = False, no_vote: bool = False) -> RaftNode:
    """A member (`self_addr` None: a non-voting one, with no address of its own); a
    durable one has a DurableJournal for its journal file and waits for it."""
    if not durable:
        return RaftNode(self_addr, other_addrs, conf=conf, consumers=consumers,
                        transport_class=WireTransport, no_vote=no_vote)
    dump_path = conf.fullDumpFile

    def create(path: Optional[str] = None) -> Any:
        if path is None:
            return pj.MemoryJournal()
        return DurableJournal(path, dump_path)
    if dump_path:
        DURABLE_DUMPS.add(os.path.abspath(dump_path))
    with _factory_lock:  # pysyncobj creates its journal through this module-level name
        original = ps.createJournal
        ps.createJournal = create
        try:
            return RaftNode(self_addr, other_addrs, conf=conf, consumers=consumers,
                            transport_class=SyncingTransport, no_vote=no_vote, durable=True)
        finally:
            ps.createJournal = original
