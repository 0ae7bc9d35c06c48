"""How often the leader sends the log to non-voting members (issue 27, the submit latency).

pysyncobj's leader sends its append-entries to every member, read-only nodes included,
each time an entry is appended and again each time one is applied (to carry the commit
index): with 22 non-voting members, every write woke 22 processes twice and made the
leader pickle and send 44 more messages, and a write's latency grew fivefold from 3 to
25 peers on two cores. A non-voting member counts in no quorum, so nothing waits for it
but its own readers; here it gets the log every READER_PERIOD (100 ms; at least the
append-entries period), in one batch that doubles as its heartbeat, except a member that
forwarded a write: it is sent to at once until it has been sent a commit index that
covers its write, so its client waits no longer than on a voter; and a member catching
up (it needs the snapshot, or is more than CATCH_UP entries behind) gets every send.

What a lagging non-voter changes: a read there without X-JM-Min-Index may be older by up
to a period (with it, the read waits as before), a job placed on it starts up to a
period later, and a lease round reaches it that much later (`beats.stuck_round`
allows a lease). Voters get every send as before: commits, elections and the leader's
view of its followers are untouched.

`ReaderFanout` decides (pure, time passed in); `LazyReaders` (a part of raft/raftnode.py's
node) narrows pysyncobj's send to what it decides, and WireTransport tells it which member
forwarded which write (pysyncobj's "apply_command_response" carries the index).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, Optional

from raft.door import NodeView

READER_PERIOD = 0.1  # s: how often every non-voting member gets the log
CATCH_UP = 1000  # entries behind: a non-voting member catching up gets every send


@dataclass
class ReaderFanout:
    period: float  # s: a non-voting member gets the log at least this often
    last_all: float = float("-inf")  # when every reader was last sent to
    waiting: dict = field(default_factory=dict)  # reader -> log index of its write

    def forwarded(self, reader: Hashable, index: int) -> None:
        """`reader` forwarded a write the leader appended at `index`."""
        if index > self.waiting.get(reader, 0):
            self.waiting[reader] = index

    def targets(self, now: float, readers: Iterable[Hashable],
                behind: Iterable[Hashable] = ()) -> Optional[set]:
        """The readers this send goes to; None: all of them (a period has passed). A
        reader `behind` (catching up: a snapshot, or far behind) gets every send."""
        if now - self.last_all >= self.period:
            return None
        catching_up = set(behind)
        return {r for r in readers if r in self.waiting or r in catching_up}

    def sent(self, now: float, to: Optional[set], commit_index: int) -> None:
        """A send went to `to` (None: every reader) carrying `commit_index`: a reader
        whose write it covers waits no more."""
        if to is None:
            self.last_all = now
        for reader in list(self.waiting if to is None else to):
            if self.waiting.get(reader, commit_index + 1) <= commit_index:
                del self.waiting[reader]


class LazyReaders:
    """A leader's append-entries reach the non-voting members as `ReaderFanout` says.
    pysyncobj iterates its set of read-only nodes when it sends; that set is narrowed for
    the call (on the tick thread, the only one that sends or changes the set) and made
    whole again after, less any reader that disconnected meanwhile."""

    def __init__(self, view: NodeView) -> None:
        self.view = view
        self.fanout: Optional[ReaderFanout] = None

    def note_forwarded(self, node: Any, index: int) -> None:
        """Called by the transport (tick thread) when the leader answers a forwarded
        write with its log index."""
        fanout = self.fanout
        if fanout is not None and node in self.view.readers:
            fanout.forwarded(node, index)

    def send(self, send_all: Callable[[], None], now: float) -> None:
        """Run pysyncobj's send (`send_all`) to the readers due now."""
        view = self.view
        fanout = self.fanout
        if fanout is None:
            fanout = self.fanout = ReaderFanout(max(READER_PERIOD, view.append_period))
        every = view.readers
        to = fanout.targets(now, every, self._catching_up(every))
        if to is None or not every:
            send_all()
        else:
            narrowed = set(to)
            view.readers = narrowed
            try:
                send_all()
            finally:
                view.readers = every
                every.difference_update(to - narrowed)  # disconnected during the send
        fanout.sent(now, to, view.commit_index)

    def _catching_up(self, readers: set) -> list:
        """Readers that need the snapshot (their next entry is compacted away) or are
        more than CATCH_UP entries behind the commit index (a reader just started has
        acknowledged nothing): they get every send until they have caught up."""
        view = self.view
        nxt, match, commit = view.next_index, view.match_index, view.commit_index
        first = view.first_index
        return [r for r in readers
                if nxt.get(r, 0) <= first or commit - match.get(r, 0) > CATCH_UP]
