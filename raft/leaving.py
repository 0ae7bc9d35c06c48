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

Everything here runs on pysyncobj's tick thread (ticks and message handlers); the flags
are set from the event loop (a plain attribute: read at the next tick).
"""
from __future__ import annotations

from typing import Any

from pysyncobj.monotonic import monotonic as monotonic_time
from pysyncobj.syncobj import _RAFT_STATE

_ELECTION_MESSAGES = frozenset({"request_vote", "timeout_now", "pre_vote"})
LEAVING = "leaving"  # a member's word that it leaves (raft/wire.py lets it through)
FAR = 10 ** 9  # s: an election deadline never reached


class Leaving:
    _leaving = False  # out of elections for good (its peer is stopping)
    _holding = False  # a leader handing over: no new entry
    _vote_for = None  # the address of the member it asked to take over, while it waits
    _announced = False  # it told the others it leaves
    _left: frozenset = frozenset()  # the addresses of members that said they leave

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:
        if isinstance(message, dict) and message.get("type") == LEAVING:
            self._left = self._left | {getattr(node, "address", str(node))}
            return
        if (self._leaving and isinstance(message, dict)
                and message.get("type") in _ELECTION_MESSAGES
                and not (message.get("type") == "request_vote" and self._vote_for
                         and getattr(node, "address", None) == self._vote_for)):
            return  # no vote (but the target's), no pre-vote, no election on request
        super()._SyncObj__onMessageReceived(node, message)  # type: ignore[misc]

    def _onTick(self, timeToWait: float = 0.0) -> None:
        if self._left:  # one whose connection went has stopped: started again, it counts
            up = {getattr(n, "address", str(n)) for n in self._SyncObj__connectedNodes}
            self._left = self._left & up
        if self._leaving and not self._announced:
            self._announced = True
            for node in list(self._SyncObj__otherNodes):
                self._SyncObj__transport.send(node, {"type": LEAVING})
        if self._leaving and self._SyncObj__raftState != _RAFT_STATE.LEADER:
            self._SyncObj__raftElectionDeadline = monotonic_time() + FAR
        super()._onTick(timeToWait)  # type: ignore[misc]

    def _checkCommandsToApply(self) -> None:
        if self._holding and self._SyncObj__raftState == _RAFT_STATE.LEADER:
            return  # (queued: appended by whoever leads next, or by this one if it stays)
        super()._checkCommandsToApply()  # type: ignore[misc]
