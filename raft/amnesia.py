"""A member that does not vote until it has caught up (jm/policy/members/identity.py says when).

pysyncobj has no learners: a member votes as soon as it runs. `CatchingUp`, a part of
raft/raftnode.py's node, makes a member started with `no_vote` ignore vote requests and
leadership transfers and never campaign, while it replicates the log as usual (its
acknowledgements are true: it has the entries). The first append-entries from a leader
tells it how far that leader had committed; once it has applied that much it votes again.
Tick thread only.
"""
from __future__ import annotations

import logging
from typing import Any, Optional

from raft.door import NodeView
from raft.leaving import ELECTION_MESSAGES, FAR

log = logging.getLogger("jm.raft")


class CatchingUp:
    def __init__(self, view: NodeView, no_vote: bool) -> None:
        self.view = view
        # None: votes; -1: waits for a leader's commit index; n > 0: votes once it applied n
        self.target: Optional[int] = -1 if no_vote else None

    @property
    def voting(self) -> bool:
        return self.target is None

    def admit(self, kind: Optional[str], message: Any) -> bool:
        """Whether a message of `kind` goes on to the node's handler."""
        target = self.target
        if target is None:
            return True
        if kind in ELECTION_MESSAGES:
            return False  # not a voter yet: no vote, no election on request
        if kind == "append_entries" and target < 0:
            self.target = max(1, int(message.get("commit_index") or 0))
            log.info("catching up to index %d before voting", self.target)
        return True

    def tick(self, now: float) -> None:
        target = self.target
        if target is None:
            return
        if target > 0 and self.view.applied >= target:
            self.target = None
            self.view.election_deadline = now + 1.0
            log.warning("caught up (applied index %d): this member votes again", target)
        else:
            self.view.election_deadline = now + FAR
