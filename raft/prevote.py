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

Everything here runs on pysyncobj's tick thread (ticks and message handlers).
"""
from __future__ import annotations

import logging
import math
from typing import Any

from pysyncobj.monotonic import monotonic as monotonic_time
from pysyncobj.syncobj import _RAFT_STATE

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
    _pv_term = -1  # the term of this member's pre-vote round in progress
    _pv_granted: frozenset = frozenset()
    _pv_go = False  # a majority granted: pysyncobj's election runs at the next tick
    _leader_heard = float("-inf")  # monotonic time of the last append-entries of a leader

    def _pv_last(self) -> tuple[int, int]:
        return (self._SyncObj__getCurrentLogTerm(), self._SyncObj__getCurrentLogIndex())

    def _SyncObj__onMessageReceived(self, node: Any, message: Any) -> None:
        kind = message.get("type") if isinstance(message, dict) else None
        if kind == PRE_VOTE:
            self._pv_answer(node, message)
            return
        if kind == PRE_VOTE_RESPONSE:
            self._pv_count(node, message)
            return
        if kind == "append_entries":
            term = message.get("term", -1)
            if term >= self._SyncObj__raftCurrentTerm:
                self._leader_heard = monotonic_time()
                self._pv_go = False
            elif isinstance(term, int) and self._SyncObj__selfNode is not None:
                self._tell_term(node, term)
        super()._SyncObj__onMessageReceived(node, message)  # type: ignore[misc]

    def _tell_term(self, node: Any, leader_term: int) -> None:
        """A leader of an older term sends entries: this member's term went past it
        without the others hearing (its vote requests were lost, say, while its disk held
        it). pysyncobj drops the leader's messages and answers nothing, and pre-votes go
        unanswered while that leader is heard: the member would stay out for good. So it
        tells the leader its term the way Raft does, with a vote request: the leader
        steps down, grants it only to a log as up to date as its own, and the members
        elect a leader at a newer term (as etcd answers such a leader; at most once per
        minimum election timeout per leader)."""
        now = monotonic_time()
        told = getattr(self, "_pv_told", None)
        if told is None:
            told = self._pv_told = {}
        if now - told.get(node, float("-inf")) < self._SyncObj__conf.raftMinTimeout:
            return
        told[node] = now
        last_term, last_index = self._pv_last()
        log.info("a leader of term %d is behind this member's term %d: telling it",
                 leader_term, self._SyncObj__raftCurrentTerm)
        self._SyncObj__transport.send(node, {"type": "request_vote",
                                             "term": self._SyncObj__raftCurrentTerm,
                                             "last_log_index": last_index,
                                             "last_log_term": last_term})

    def _pv_answer(self, node: Any, message: dict) -> None:
        try:
            term = int(message["term"])
            last = (int(message["last_log_term"]), int(message["last_log_index"]))
        except (KeyError, TypeError, ValueError):
            return
        ok = grants(self._SyncObj__raftState == _RAFT_STATE.LEADER,
                    monotonic_time() - self._leader_heard,
                    self._SyncObj__conf.raftMinTimeout, self._SyncObj__raftCurrentTerm,
                    self._pv_last(), term, last)
        self._SyncObj__transport.send(node, {"type": PRE_VOTE_RESPONSE, "term": term,
                                             "granted": ok})

    def _pv_count(self, node: Any, message: dict) -> None:
        if (message.get("term") != self._pv_term or not message.get("granted")
                or self._SyncObj__raftState == _RAFT_STATE.LEADER):
            return
        self._pv_granted = self._pv_granted | {node}
        if len(self._pv_granted) + 1 > (len(self._SyncObj__otherNodes) + 1) / 2:
            self._pv_term = -1
            self._pv_go = True
            self._SyncObj__raftElectionDeadline = 0  # campaign at the next tick

    def _onTick(self, timeToWait: float = 0.0) -> None:
        campaign = (self._SyncObj__raftState == _RAFT_STATE.LEADER
                    or self._SyncObj__selfNode is None
                    or self._SyncObj__transferInProgress
                    or not self._SyncObj__otherNodes)
        if (not campaign
                and self._SyncObj__raftElectionDeadline < monotonic_time()
                and self._SyncObj__connectedToAnyone()):
            if self._pv_go:
                self._pv_go, campaign = False, True  # pysyncobj campaigns in this tick
                log.info("no leader heard: campaigning for term %d (a majority granted a "
                         "pre-vote)", self._SyncObj__raftCurrentTerm + 1)
            else:
                self._pv_start()
        if campaign:
            return super()._onTick(timeToWait)  # type: ignore[misc]
        # pysyncobj looks at the election timeout again further on in its tick, after work
        # that can take long (its one-second write of the term and commit index, which
        # waits while the disk is full): a timeout passing in between would start an
        # election without a pre-vote, raising this member's term where no one may hear it
        deadline = self._SyncObj__raftElectionDeadline
        self._SyncObj__raftElectionDeadline = math.inf
        try:
            super()._onTick(timeToWait)  # type: ignore[misc]
        finally:  # (unless a handler set it meanwhile: an append-entries, a timeout_now)
            if self._SyncObj__raftElectionDeadline == math.inf:
                self._SyncObj__raftElectionDeadline = deadline

    def _pv_start(self) -> None:
        """Ask every other member; another round after a new random timeout."""
        self._pv_term = self._SyncObj__raftCurrentTerm + 1
        self._pv_granted = frozenset()
        last_term, last_index = self._pv_last()
        message = {"type": PRE_VOTE, "term": self._pv_term, "last_log_term": last_term,
                   "last_log_index": last_index}
        for node in list(self._SyncObj__otherNodes):
            self._SyncObj__transport.send(node, message)
        self._SyncObj__raftElectionDeadline = (monotonic_time()
                                               + self._SyncObj__generateRaftTimeout())
