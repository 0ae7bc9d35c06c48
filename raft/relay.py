"""Writes relayed to the leader over the Raft connections, for its group commit.

A follower's own batch of submissions goes through pysyncobj's command forwarding as
an entry of its own: three peers then write three entries a round, each with its own
append-entries, fsyncs, answers and applies, and each peer has one batch in flight,
so a batch holds at most half of that peer's waiting clients. A relayed write is an
item, not an entry: the follower sends it to the leader on the Raft connection it
already has (a `relay` message: the items' encoded commands), the leader puts it into
its own batcher beside its own clients' items, and one entry a round holds every peer's.
Nothing comes back on the wire: the follower learns each item's outcome by applying the
entry that holds it (its own replica, so what its client reads next sees the write).

`RelayBook` decides what a tick sends (pure: the items waiting, the leader they went to,
time passed in); `Relay` is the thin driver on a node's tick thread. An item is sent
once to each leader: again when the leader changes (the old one may have dropped it) or
when RESEND s passed without its entry applied here, never after its deadline (its
caller has given up and answered). An item applied twice (sent to an old and a new
leader, both appended it) is harmless for the items relayed here: the second copy is
refused by the state (a job id that exists), and the first one's outcome is the one its
caller got.

Only a cluster whose every peer speaks raft.protocol.RELAY relays (an older member
refuses a message type it does not know, dropping the connection).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Optional

from raft.door import NodeView

MESSAGE = "relay"  # the Raft message type: {"type": "relay", "items": [bytes, ...]}
RESEND = 1.0  # seconds: an item not applied this long after it was sent goes again
MAX_MESSAGE_BYTES = 1024 * 1024  # items' bytes a message carries (at least one item)


@dataclass
class _Item:
    blob: bytes
    deadline: float
    sent_to: Optional[str] = None  # the leader it was last sent to
    sent_at: float = 0.0


@dataclass
class RelayBook:
    """The items waiting for their entry to be applied here, by key."""
    items: dict[Hashable, _Item] = field(default_factory=dict)

    def add(self, key: Hashable, blob: bytes, deadline: float) -> None:
        self.items[key] = _Item(blob, deadline)

    def forget(self, key: Hashable) -> None:
        self.items.pop(key, None)

    def due(self, leader: Optional[str], now: float) -> list[bytes]:
        """The items to send to `leader` now (None: no leader known, nothing is sent):
        those not sent to it yet, and those sent more than RESEND s ago (a leader that
        lost the lead for a moment and won it back dropped what came meanwhile). Items
        past their deadline are dropped unsent."""
        for key in [k for k, it in self.items.items() if it.deadline <= now]:
            del self.items[key]
        if leader is None:
            return []
        out = []
        for it in self.items.values():
            if it.sent_to != leader or now - it.sent_at >= RESEND:
                it.sent_to, it.sent_at = leader, now
                out.append(it.blob)
        return out


def messages(blobs: list[bytes], most: int = MAX_MESSAGE_BYTES) -> list[list[bytes]]:
    """The items cut into messages of at most `most` bytes of items (one item larger
    than that goes alone), in order."""
    out: list[list[bytes]] = []
    size = 0
    for blob in blobs:
        if not out or (size + len(blob) > most and out[-1]):
            out.append([])
            size = 0
        out[-1].append(blob)
        size += len(blob)
    return out


def received_items(message: Any) -> Optional[list[bytes]]:
    """A relay message's items (None: not a well-formed relay message)."""
    items = message.get("items") if isinstance(message, dict) else None
    if not isinstance(items, list) or not all(isinstance(b, bytes) for b in items):
        return None
    return items


class Relay:
    """One member's relay: `send` (any thread) queues items for the leader; each tick of
    the serving node sends what is due; `relay` messages a leader receives go to `sink`
    (called on the event loop with the list of encoded items)."""

    def __init__(self, loop: Any, serving: Callable[[], Any],
                 clock: Callable[[], float]) -> None:
        """`serving()`: the node that serves now (a promotion replaces it)."""
        self.loop, self.serving, self.clock = loop, serving, clock
        self.book = RelayBook()
        self.sink: Optional[Callable[[list[bytes]], None]] = None
        self._lock = threading.Lock()  # (the book: the loop adds, the tick thread sends)
        self._woken = False  # a wake-up of the tick is on its way

    def attach(self, node: Any) -> None:
        """Run on `node`'s ticks and hear its relay messages (every node a member makes)."""
        node.relay_received = self._received
        node.addOnTickCallback(lambda: self._tick(node))

    def send(self, key: Hashable, blob: bytes, deadline: float) -> None:
        with self._lock:
            self.book.add(key, blob, deadline)
            woken, self._woken = self._woken, True
        node = self.serving()
        if node is not None and not woken:  # (one wake-up for the items of a burst)
            NodeView(node).wake()  # (its tick is in poll() for up to a tick period)

    def forget(self, key: Hashable) -> None:
        with self._lock:
            self.book.forget(key)

    def _tick(self, node: Any) -> None:
        if node is not self.serving() or not (self.book.items or self._woken):
            return
        leader = node._getLeader()
        view = NodeView(node)
        with self._lock:
            self._woken = False
            if not self.book.items:
                return
            due = self.book.due(None if leader is None else str(leader), self.clock())
        if not due:
            return
        if view.is_leader:  # (it became the leader meanwhile: its own batcher takes them)
            self._received(due)
            return
        for items in messages(due):
            view.send(leader, {"type": MESSAGE, "items": items})

    def _received(self, items: list[bytes]) -> None:
        sink = self.sink
        if sink is None:
            return
        try:
            self.loop.call_soon_threadsafe(sink, items)
        except RuntimeError:  # the loop is closed: the peer is stopping
            pass
