"""A member that is stopping leaves elections, and a leader that hands over holds its log
(Raft thesis 3.10, leadership transfer).

pysyncobj's transfer sends TimeoutNow to a member whose log matches the leader's and the
member campaigns at once; but the leader goes on appending what its clients and the
other members send it (the peers' lease heartbeats, every few hundred milliseconds), so
by the time the vote requests arrive the others' logs are ahead of the candidate's: they
refuse it, nobody wins, and after an election timeout anyone may campaign, the stopping
peer too. Meanwhile no heartbeat is acknowledged and every peer's lease runs out.

* `hold`: while set, a leader appends nothing new (the commands wait in pysyncobj's
  queue; once it has stepped down they go to the new leader as a follower's do), so the
  target's log stays as up to date as any and it wins the election TimeoutNow starts.
* `leave`: from the moment its peer starts stopping, a member never campaigns, never
  answers a pre-vote, a vote request or a TimeoutNow: a stopping peer can no longer
  depose the leader the others elected, nor be elected and stop under them. The one
  vote it still gives is to the member it asked to take over (`vote_for`), while it
  waits for it: with three voters that vote and the target's own make its majority even
  where the third member cannot be reached (a member just restarted may not be).

A leaving member says so to the others once (a `leaving` message): a leader handing off
asks none of them to take over (a whole cluster that stops would wait an election timeout
for each), until its connection goes (it stopped; started again, it counts again).

`Leaving` is one part of raft/raftnode.py's node: it sees every message first
(`admit`), every tick (`tick`) and whether a leader may append (`may_append`). It runs on
pysyncobj's tick thread; `leave`, `hold` and `release` are called from the event loop (plain
attributes: read at the next tick).
"""
from __future__ import annotations

from typing import Any, Optional

from raft.door import NodeView

ELECTION_MESSAGES = frozenset({"request_vote", "timeout_now", "pre_vote"})
LEAVING = "leaving"  # a member's word that it leaves (raft/wire.py lets it through)
FAR = 10 ** 9  # s: an election deadline never reached


def address_of(node: Any) -> str:
    return getattr(node, "address", str(node))


class Leaving:
    def __init__(self, view: NodeView) -> None:
        self.view = view
        self.leaving = False  # out of elections for good (its peer is stopping)
        self.holding = False  # a leader handing over: no new entry
        self.vote_for: Optional[str] = None  # the member it asked to take over, meanwhile
        self.announced = False  # it told the others it leaves
        self.left: frozenset = frozenset()  # the addresses of members that said they leave

    def leave(self) -> None:
        self.leaving = True

    def hold(self) -> None:
        """A leader handing over: append nothing new (`vote_for` names its target)."""
        self.holding = True

    def release(self) -> None:
        self.holding, self.vote_for = False, None

    def admit(self, node: Any, kind: Optional[str]) -> bool:
        """Whether a message of `kind` from `node` goes on to the node's handler."""
        if kind == LEAVING:
            self.left = self.left | {address_of(node)}
            return False
        if (self.leaving and kind in ELECTION_MESSAGES
                and not (kind == "request_vote" and self.vote_for
                         and getattr(node, "address", None) == self.vote_for)):
            return False  # no vote (but the target's), no pre-vote, no election on request
        return True

    def tick(self, now: float) -> None:
        view = self.view
        if self.left:  # one whose connection went has stopped: started again, it counts
            up = {address_of(n) for n in view.connected}
            self.left = self.left & up
        if self.leaving and not self.announced:
            self.announced = True
            for node in list(view.others):
                view.send(node, {"type": LEAVING})
        if self.leaving and not view.is_leader:
            view.election_deadline = now + FAR

    def may_append(self) -> bool:
        """False while a leader holds its log (its commands wait in pysyncobj's queue:
        appended by whoever leads next, or by this one if it stays)."""
        return not (self.holding and self.view.is_leader)
