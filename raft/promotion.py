"""Making a member's pysyncobj node, and promoting a non-voting member to voter in place.

A non-voting member (jm/policy/members/voters.py) is a pysyncobj read-only node: it has no Raft
port and no journal, and pysyncobj cannot turn a read-only node into a voter. So a
promotion starts a second, voting node on the same peer, on the peer's Raft port with a
fresh journal, next to the read-only one, which keeps serving: REST reads, JobMasters
and lease renewals go on from its replica. The voting node starts as a learner (it votes
only once caught up, raft/amnesia.py) and gets the leader's snapshot and log once the
leader has added it to the Raft membership.

The hand-over keeps the state from going backwards and every apply notification exactly
once: both nodes apply the same log into their own ClusterState, under one lock (the
gate); while the voting node is behind, its applies notify nobody; the first time it has
applied as much as the read-only one, it takes over: readers see its state from then on,
and from the next entry on its applies notify as before. A snapshot that brings it past
the read-only one hands over too, and counts as a snapshot load for the listeners. The
read-only node goes on applying, unseen and notifying nobody, for RETIRE_AFTER seconds,
so that writes in flight through it get their results; then it is stopped.
"""
from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Any, Optional

from pysyncobj import SyncObjConf

from raft.raftnode import new_node
from raft.snapshots import SnapshotTimer
from raft.torn import repair_torn_tail

log = logging.getLogger("jm.raft")

JOURNAL_FILES = ("raft.journal", "raft.dump")
READER_DUMP = "raft.reader-dump"  # a read-only node's compaction file (removed at start)
RETIRE_AFTER = 30.0  # s the read-only node runs on after the hand-over
READER_TICK = 0.1  # s: a read-only node's idle tick


def make_syncobj(self_addr: str, other_addrs: list[str], data_dir: str, settings: Any,
                 consumer: Any, voter: bool, no_vote: bool) -> Any:
    """A voter (journal and dump in `data_dir`, fsynced with settings.fsync, listening on
    `self_addr`) or a read-only node connected to the voters `other_addrs`."""
    if not voter:  # (a restart gets the leader's snapshot: nothing of its own is kept)
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(data_dir, READER_DUMP))
    conf = SyncObjConf(
        journalFile=os.path.join(data_dir, "raft.journal") if voter else None,
        # a read-only node keeps its log in memory but compacts it through a file all
        # the same: pysyncobj then pickles the state in a forked child; without a file it
        # pickles and gzips it on its tick thread, holding the GIL for seconds at 50,000
        # jobs (the peer's event loop and lease renewals stall with it)
        fullDumpFile=os.path.join(data_dir, "raft.dump" if voter else READER_DUMP),
        appendEntriesUseBatch=settings.use_batch,
        appendEntriesPeriod=settings.append_entries_period,
        raftMinTimeout=settings.min_timeout,
        raftMaxTimeout=settings.max_timeout,
        leaderFallbackTimeout=settings.leader_fallback_timeout,
        connectionRetryTime=settings.connection_retry_time,
        connectionTimeout=settings.connection_timeout,
        # a read-only node keeps no timers that matter (no election, no append-entries to
        # send): it wakes on its sockets and on its own writes (pysyncobj's pipe), so
        # its idle ticks can be ten times rarer than a voter's
        autoTickPeriod=settings.auto_tick_period if voter else max(
            settings.auto_tick_period, READER_TICK),
        password=settings.password,
        logCompactionMinEntries=settings.log_compaction_min_entries,
        logCompactionMinTime=settings.log_compaction_min_time,
        commandsWaitLeader=False,
        bindAddress=self_addr if voter else None,
        dynamicMembershipChange=True,  # POST/DELETE /cluster/peers (one at a time)
    )
    conf.maxMessageSize = settings.max_message_size  # read by WireTransport
    conf.maxInboundConnections = settings.max_connections
    if conf.journalFile:
        repair_torn_tail(conf.journalFile)  # (a power cut may have left it torn)
    if not voter:
        syncobj = new_node(None, other_addrs, conf, [consumer])
    else:
        syncobj = new_node(self_addr, other_addrs, conf, [consumer], durable=settings.fsync,
                           no_vote=no_vote)
    SnapshotTimer().attach(syncobj)  # (its first snapshot is minutes or 20,000 entries away)
    return syncobj


def forget_journal(data_dir: str) -> None:
    """A non-voting member's journal files are from a membership it left (a voter that
    was replaced while dead): a voter it becomes again starts with none."""
    for name in JOURNAL_FILES:
        try:
            os.remove(os.path.join(data_dir, name))
        except FileNotFoundError:
            pass


class Handover:
    """The voting node catching up next to the read-only one (see the module's doc)."""

    def __init__(self, consumer: Any, syncobj: Any) -> None:
        self.consumer, self.syncobj = consumer, syncobj

    def due(self, consumer: Any, serving: Any) -> Optional[bool]:
        """Called under the gate after `consumer` applied or loaded something: None if it
        does not take over now; else whether it is ahead of `serving` (a snapshot brought
        it past: listeners must reload), False if it is exactly where `serving` is."""
        if consumer is not self.consumer:
            return None
        mine, theirs = consumer.state.applied, serving.state.applied
        if mine < theirs:
            return None
        return mine > theirs

    def stop(self) -> None:
        """Abandon it (the leader did not add this member in time)."""
        stop_soon(self.syncobj)


def stop_soon(syncobj: Any) -> None:
    """Stop a pysyncobj node from another thread (never its own tick thread)."""
    threading.Thread(target=syncobj.destroy_synchronous, name="raft-stop",
                     daemon=True).start()
