"""A member's side of its promotion from non-voting member to voter (raft/promotion.py):
`Promotion`, a role of raft/node.py's RaftHost (`host.promotion`), starts the voting node
next to the read-only one, abandons it, and hands over to it once it has caught up,
replacing the member's current node (raft/current.py) under the host's gate."""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Optional

from raft.consumer import StateConsumer
from raft.current import CurrentNode
from raft.door import transport_of
from raft.promotion import RETIRE_AFTER, Handover, forget_journal, make_syncobj
from raft.transport import WireTransport

log = logging.getLogger("jm.raft")


class Promotion:
    """begin_voting / abandon_voting, and the hand-over to the voting node."""

    def __init__(self, current: CurrentNode, gate: threading.RLock, self_addr: str,
                 data_dir: str, settings: Any, new_consumer: Callable[[], StateConsumer],
                 on_node: Callable[[Any], None],
                 took_over: Callable[[bool], None]) -> None:
        """`new_consumer()`: the voting node's consumer; `on_node(syncobj)`: the member
        takes the node in (its journal's failures stop the member, its ticks relay);
        `took_over(ahead)`: called (under the gate) once the voting node serves, `ahead`
        when a snapshot brought it past the read-only node."""
        self.current, self.gate, self.self_addr = current, gate, self_addr
        self.data_dir, self.settings = data_dir, settings
        self.new_consumer, self.on_node, self.took_over = new_consumer, on_node, took_over
        self.handover: Optional[Handover] = None  # the voting node, catching up
        self.retired: Any = None  # the read-only node after the hand-over, for a while

    def begin_voting(self, voters: list[str]) -> None:
        """Start this non-voting member's voting node next to its read-only one; it takes
        over once the leader has added it and it has caught up (ValueError if this is a
        voter already). Idempotent while one is starting."""
        if self.current.is_voter:
            raise ValueError("this peer is a voter already")
        if self.handover is not None:
            return
        forget_journal(self.data_dir)
        consumer = self.new_consumer()
        syncobj = make_syncobj(self.self_addr, [v for v in voters if v != self.self_addr],
                               self.data_dir, self.settings, consumer, True, True)
        self.on_node(syncobj)
        with self.gate:
            self.handover = Handover(consumer, syncobj)
        log.info("becoming a voter: the voting node listens on %s and catches up",
                 self.self_addr)

    def abandon_voting(self) -> bool:
        """Stop a voting node that has not taken over (False if none, or it took over)."""
        with self.gate:
            handover, self.handover = self.handover, None
        if handover is None:
            return False
        handover.consumer.frozen = True
        handover.stop()
        log.warning("the promotion to voter was abandoned: still a non-voting member")
        return True

    def hand_over(self, consumer: Any) -> bool:
        """(Tick thread, under the gate) after `consumer` applied or loaded: True if it is
        the voting node's and it took over now (the caller must not notify for this
        entry, which the read-only node notified already, unless it jumped ahead)."""
        handover, cur = self.handover, self.current
        ahead = handover.due(consumer, cur.consumer) if handover is not None else None
        if ahead is None:
            return False
        old_syncobj = cur.syncobj
        cur.consumer, cur.syncobj, cur.is_voter = consumer, handover.syncobj, True
        cur.transport = wire_of(handover.syncobj)
        self.handover = None
        # the read-only node goes on applying, unseen, for a while: writes in flight
        # through it get their results
        self.retired = old_syncobj
        timer = threading.Timer(RETIRE_AFTER, self._stop_retired, (old_syncobj,))
        timer.daemon = True
        timer.start()
        log.warning("this peer is a voter now (applied index %d)", consumer.state.applied)
        self.took_over(bool(ahead))
        return True

    def _stop_retired(self, syncobj: Any) -> None:
        with self.gate:
            if self.retired is not syncobj:
                return
            self.retired = None
        syncobj.destroy_synchronous()

    def take_nodes(self) -> list:
        """The nodes besides the current one (a voting node catching up, a retired
        read-only node), taken for the member's stop."""
        with self.gate:
            handover, self.handover = self.handover, None
            retired, self.retired = self.retired, None
        return [n for n in (handover.syncobj if handover else None, retired) if n is not None]


def wire_of(syncobj: Any) -> Optional[WireTransport]:
    """The node's Raft transport, when it is ours (raft/transport.py)."""
    transport = transport_of(syncobj)
    return transport if isinstance(transport, WireTransport) else None
