"""Pre-vote (Raft thesis 9.6): a member campaigns only if a majority would vote for it.

pysyncobj starts an election as soon as a member's election timeout passes: it raises its
term, and a leader that hears the higher term steps down. A follower that was restarted
(its first timeout can pass before the leader has reconnected to it), or that missed a
few heartbeats on a busy host, so deposes a healthy leader: every write in flight fails
with LEADER_CHANGED and leadership may move (a rolling restart must restart the leader
last). pysyncobj never tells a leader about a higher term in an answer either, so simply
ignoring such vote requests would leave that member campaigning alone for ever.

With this mixin (placed before pysyncobj's SyncObj in a class's bases), a member whose
timeout passed first asks the others whether they would vote for it at the next term,
without changing any term: a member grants that when it is not the leader, has not
heard from a leader for the minimum election timeout, and the asker's log is at least
as up to date as its own. Only with a majority of grants does pysyncobj's election run.
A leadership transfer (timeout_now) campaigns at once, as before. pysyncobj looks at the
timeout a second time later in its tick: meanwhile the election timeout is put out of its
reach, so that no election starts without a majority of pre-votes.

A member whose term went past the leader's all the same (its vote requests were lost)
answers that leader's entries with a vote request at its term, so that it steps down and
a leader is elected at a newer term, rather than leaving that member out for good.

`PreVote` is one part of raft/raftnode.py's node: it sees the messages (`admit`) and says
at each tick whether pysyncobj may start an election in it (`tick`); where not, the node
puts the election deadline out of pysyncobj's reach for that tick. Tick thread only.
"""
from __future__ import annotations

import logging
from typing import Any, Optional

from raft.door import NodeView

log = logging.getLogger("jm.raft")

PRE_VOTE, PRE_VOTE_RESPONSE = "pre_vote", "pre_vote_response"


def grants(is_leader: bool, since_leader: float, min_timeout: float, my_term: int,
           my_last: tuple[int, int], term: int, last: tuple[int, int]) -> bool:
    """Whether a member grants a pre-vote for `term` to a member whose log ends at `last`
    ((term, index) of its last entry): not while a leader is heard from, and only to a
    log at least as up to date as its own (the test a real vote makes)."""
    return (not is_leader and since_leader >= min_timeout and term >= my_term
            and last >= my_last)


class PreVote:
    def __init__(self, view: NodeView) -> None:
        self.view = view
        self.term = -1  # the term of this member's pre-vote round in progress
        self.granted: frozenset = frozenset()
        self.go = False  # a majority granted: pysyncobj's election runs at the next tick
        self.leader_heard = float("-inf")  # when a leader's append-entries last came
        self.told: dict = {}  # leader -> when it was last told this member's term

    def admit(self, node: Any, kind: Optional[str], message: Any, now: float) -> bool:
        """Whether a message goes on to the node's handler (pre-votes stop here)."""
        if kind == PRE_VOTE:
            self._answer(node, message, now)
            return False
        if kind == PRE_VOTE_RESPONSE:
            self._count(node, message)
            return False
        if kind == "append_entries":
            term = message.get("term", -1)
            if term >= self.view.term:
                self.leader_heard = now
                self.go = False
            elif isinstance(term, int) and self.view.has_address:
                self._tell_term(node, term, now)
        return True

    def _tell_term(self, node: Any, leader_term: int, now: float) -> None:
        """A leader of an older term sends entries: this member's term went past it
        without the others hearing (its vote requests were lost, say, while its disk held
        it). pysyncobj drops the leader's messages and answers nothing, and pre-votes go
        unanswered while that leader is heard: the member would stay out for good. So it
        tells the leader its term the way Raft does, with a vote request: the leader
        steps down, grants it only to a log as up to date as its own, and the members
        elect a leader at a newer term (as etcd answers such a leader; at most once per
        minimum election timeout per leader)."""
        view = self.view
        if now - self.told.get(node, float("-inf")) < view.min_timeout:
            return
        self.told[node] = now
        last_term, last_index = view.last_entry()
        log.info("a leader of term %d is behind this member's term %d: telling it",
                 leader_term, view.term)
        view.send(node, {"type": "request_vote", "term": view.term,
                         "last_log_index": last_index, "last_log_term": last_term})

    def _answer(self, node: Any, message: dict, now: float) -> None:
        try:
            term = int(message["term"])
            last = (int(message["last_log_term"]), int(message["last_log_index"]))
        except (KeyError, TypeError, ValueError):
            return
        view = self.view
        ok = grants(view.is_leader, now - self.leader_heard, view.min_timeout, view.term,
                    view.last_entry(), term, last)
        view.send(node, {"type": PRE_VOTE_RESPONSE, "term": term, "granted": ok})

    def _count(self, node: Any, message: dict) -> None:
        view = self.view
        if (message.get("term") != self.term or not message.get("granted")
                or view.is_leader):
            return
        self.granted = self.granted | {node}
        if len(self.granted) + 1 > (len(view.others) + 1) / 2:
            self.term = -1
            self.go = True
            view.election_deadline = 0  # campaign at the next tick

    def tick(self, now: float) -> bool:
        """Whether pysyncobj may start an election in this tick."""
        view = self.view
        if (view.is_leader or not view.has_address or view.transferring
                or not view.others):
            return True
        if view.election_deadline < now and view.connected_to_anyone():
            if self.go:
                self.go = False  # pysyncobj campaigns in this tick
                log.info("no leader heard: campaigning for term %d (a majority granted a "
                         "pre-vote)", view.term + 1)
                return True
            self._start(now)
        return False

    def _start(self, now: float) -> None:
        """Ask every other member; another round after a new random timeout."""
        view = self.view
        self.term = view.term + 1
        self.granted = frozenset()
        last_term, last_index = view.last_entry()
        message = {"type": PRE_VOTE, "term": self.term, "last_log_term": last_term,
                   "last_log_index": last_index}
        for node in list(view.others):
            view.send(node, message)
        view.election_deadline = now + view.new_timeout()
