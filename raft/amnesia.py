"""A member that does not vote until it has caught up (jm/policy/members/identity.py says when).

pysyncobj has no learners: a member votes as soon as it runs. This mixin, placed before
pysyncobj's SyncObj (or DurableSyncObj) in a class's bases, makes a member started with
`no_vote` ignore vote requests and leadership transfers and never campaign, while it
replicates the log as usual (its acknowledgements are true: it has the entries). The
first append-entries from a leader tells it how far that leader had committed; once it
has applied that much it votes again.
"""
from __future__ import annotations

import logging
from typing import Any, Optional

from pysyncobj import SyncObj
from pysyncobj.monotonic import monotonic as monotonic_time

from raft.fanout import LazyReaders
from raft.leaving import FAR, Leaving
from raft.prevote import PreVote

log = logging.getLogger("jm.raft")


REPLICATED_ATTRIBUTES = frozenset({"_SyncObj__enabledCodeVersion"})


class _AllButReplicated(set):
    """Stands in for pysyncobj's set of the attribute names its snapshots leave out: here
    every name but those of REPLICATED_ATTRIBUTES."""

    def __contains__(self, name: object) -> bool:
        return name not in REPLICATED_ATTRIBUTES


class OwnAttributes:
    """Place first before pysyncobj's SyncObj. pysyncobj pickles into its snapshots every
    attribute of the node added after its constructor ran, and sets them on the member
    that loads one: the mixins' own state (pre-votes, the fan-out to non-voters, the
    snapshot timer) travelled to other members, and a class the restricted unpickler
    does not know made every snapshot unloadable. Only pysyncobj's code version, which
    it replicates on purpose, stays in them."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        self._SyncObj__properies = _AllButReplicated()


class NoVoteUntilCaughtUp:
    # None: votes; -1: waits for a leader's commit index; n > 0: votes once it applied n
    _no_vote_target: Optional[int] = None

    def __init__(self, *args: Any, no_vote: bool = False, **kwargs: Any) -> None:
        # before pysyncobj's constructor starts its tick thread: no election meanwhile
        self._no_vote_target = -1 if no_vote else None
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]

    @property
    def voting(self) -> bool:
        return self._no_vote_target is None

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:
        target = self._no_vote_target
        if target is not None and isinstance(message, dict):
            kind = message.get("type")
            if kind in ("request_vote", "timeout_now", "pre_vote"):
                return  # not a voter yet: no vote, no election on request
            if kind == "append_entries" and target < 0:
                self._no_vote_target = max(1, int(message.get("commit_index") or 0))
                log.info("catching up to index %d before voting", self._no_vote_target)
        super()._SyncObj__onMessageReceived(node, message)  # type: ignore[misc]

    def _onTick(self, timeToWait: float = 0.0) -> None:
        target = self._no_vote_target
        if target is not None:
            if target > 0 and self.raftLastApplied >= target:  # type: ignore[attr-defined]
                self._no_vote_target = None
                self._SyncObj__raftElectionDeadline = monotonic_time() + 1.0
                log.warning("caught up (applied index %d): this member votes again", target)
            else:
                self._SyncObj__raftElectionDeadline = monotonic_time() + FAR
        super()._onTick(timeToWait)  # type: ignore[misc]


class GuardedSyncObj(OwnAttributes, Leaving, NoVoteUntilCaughtUp, PreVote, LazyReaders,
                     SyncObj):
    """pysyncobj's SyncObj with the guard, pre-votes and batched sends to non-voting
    members (raft.fsync off; on: raft/journal.py)."""
