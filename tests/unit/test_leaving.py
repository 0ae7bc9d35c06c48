"""raft/leaving.py on a stand-in for pysyncobj's SyncObj: a leaving member drops every
election message and never reaches its election deadline; a holding leader appends
nothing new, a holding follower forwards as before."""
from pysyncobj.syncobj import _RAFT_STATE

from raft.leaving import Leaving


class _Base:
    def __init__(self, state):
        self._SyncObj__raftState = state
        self._SyncObj__raftElectionDeadline = 0.0
        self._SyncObj__otherNodes, self._SyncObj__transport = [], None
        self._SyncObj__connectedNodes = set()
        self.received, self.ticks, self.applied = [], 0, 0

    def _SyncObj__onMessageReceived(self, node, message):
        self.received.append(message["type"])

    def _onTick(self, timeToWait=0.0):
        self.ticks += 1

    def _checkCommandsToApply(self):
        self.applied += 1


class Node(Leaving, _Base):
    pass


def test_a_leaving_member_takes_part_in_no_election():
    n = Node(_RAFT_STATE.FOLLOWER)
    for kind in ("request_vote", "pre_vote", "timeout_now", "append_entries"):
        n._SyncObj__onMessageReceived("p1", {"type": kind})
    assert n.received == ["request_vote", "pre_vote", "timeout_now", "append_entries"]
    n._leaving = True
    n.received.clear()
    for kind in ("request_vote", "pre_vote", "timeout_now", "append_entries",
                 "response_vote"):
        n._SyncObj__onMessageReceived("p1", {"type": kind})
    assert n.received == ["append_entries", "response_vote"]
    n._onTick()
    assert n.ticks == 1 and n._SyncObj__raftElectionDeadline > 10 ** 8  # never campaigns


def test_a_holding_leader_appends_nothing_new():
    leader, follower = Node(_RAFT_STATE.LEADER), Node(_RAFT_STATE.FOLLOWER)
    for n in (leader, follower):
        n._holding = True
        n._checkCommandsToApply()
    assert leader.applied == 0 and follower.applied == 1  # (a follower forwards them)
    leader._holding = False
    leader._checkCommandsToApply()
    assert leader.applied == 1


class _Peer:
    def __init__(self, address):
        self.address = address


def test_a_leaving_member_votes_only_for_the_member_it_asked_to_take_over():
    n = Node(_RAFT_STATE.LEADER)
    n._leaving, n._vote_for = True, "127.0.0.1:2"
    for sender in ("127.0.0.1:2", "127.0.0.1:3"):
        for kind in ("request_vote", "pre_vote"):
            n._SyncObj__onMessageReceived(_Peer(sender), {"type": kind})
    assert n.received == ["request_vote"]  # its target's vote request, nothing else
    n._vote_for = None
    n._SyncObj__onMessageReceived(_Peer("127.0.0.1:2"), {"type": "request_vote"})
    assert n.received == ["request_vote"]


def test_a_leaving_member_says_so_once_and_others_note_who_leaves():
    class Transport:
        def __init__(self):
            self.sent = []

        def send(self, node, message):
            self.sent.append((node, message["type"]))
    n = Node(_RAFT_STATE.FOLLOWER)
    n._SyncObj__otherNodes, n._SyncObj__transport = ["a", "b"], Transport()
    n._onTick()
    assert n._SyncObj__transport.sent == []  # (not leaving)
    n._leaving = True
    n._onTick()
    n._onTick()
    assert n._SyncObj__transport.sent == [("a", "leaving"), ("b", "leaving")]
    other = Node(_RAFT_STATE.LEADER)
    other._SyncObj__connectedNodes = {_Peer("127.0.0.1:7")}
    other._SyncObj__onMessageReceived(_Peer("127.0.0.1:7"), {"type": "leaving"})
    assert other._left == {"127.0.0.1:7"} and other.received == []  # not pysyncobj's
    other._onTick()
    assert other._left == {"127.0.0.1:7"}  # still connected: still leaving
    other._SyncObj__connectedNodes = set()
    other._onTick()
    assert other._left == frozenset()  # gone: started again, it is a member like any
