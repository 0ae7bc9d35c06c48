"""RaftHost's side of promoting a non-voting member to voter (raft/promotion.py): start
the voting node, abandon it, and hand over to it once it has caught up. A mixin of
raft/node.py's RaftHost; it uses the host's attributes and helpers."""
from __future__ import annotations

import logging
import threading
from typing import Any

from raft.promotion import RETIRE_AFTER, Handover, forget_journal, make_syncobj

log = logging.getLogger("jm.raft")


class PromotionMixin:
    """begin_voting / abandon_voting, and the hand-over to the voting node."""

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
