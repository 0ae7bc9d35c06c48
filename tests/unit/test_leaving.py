"""raft/leaving.py on a stand-in for the node's view: a leaving member drops every election
message and never reaches its election deadline; a holding leader appends nothing new, a
holding follower forwards as before."""
from raft.leaving import FAR, Leaving


class _View:
    """The NodeView members Leaving reads and sets."""

    def __init__(self, leader):
        self.is_leader = leader
        self.election_deadline = 0.0
        self.others, self.connected, self.sent = [], set(), []

    def send(self, node, message):
        self.sent.append((node, message["type"]))


class _Peer:
    def __init__(self, address):
        self.address = address


def _passed(part, node, kinds):
    return [k for k in kinds if part.admit(node, k)]


def test_a_leaving_member_takes_part_in_no_election():
    part = Leaving(_View(leader=False))
    kinds = ("request_vote", "pre_vote", "timeout_now", "append_entries", "response_vote")
    assert _passed(part, "p1", kinds) == list(kinds)
    part.leave()
    assert _passed(part, "p1", kinds) == ["append_entries", "response_vote"]
    part.tick(now=5.0)
    assert part.view.election_deadline == 5.0 + FAR  # never campaigns


def test_a_holding_leader_appends_nothing_new():
    leader, follower = Leaving(_View(leader=True)), Leaving(_View(leader=False))
    for part in (leader, follower):
        part.hold()
    assert not leader.may_append() and follower.may_append()  # (a follower forwards them)
    leader.release()
    assert leader.may_append()


def test_a_leaving_member_votes_only_for_the_member_it_asked_to_take_over():
    part = Leaving(_View(leader=True))
    part.leave()
    part.hold()
    part.vote_for = "127.0.0.1:2"
    passed = [(sender, kind) for sender in ("127.0.0.1:2", "127.0.0.1:3")
              for kind in ("request_vote", "pre_vote") if part.admit(_Peer(sender), kind)]
    assert passed == [("127.0.0.1:2", "request_vote")]  # its target's vote request only
    part.release()
    assert not part.admit(_Peer("127.0.0.1:2"), "request_vote")


def test_a_leaving_member_says_so_once_and_others_note_who_leaves():
    n = Leaving(_View(leader=False))
    n.view.others = ["a", "b"]
    n.tick(now=1.0)
    assert n.view.sent == []  # (not leaving)
    n.leave()
    n.tick(now=2.0)
    n.tick(now=3.0)
    assert n.view.sent == [("a", "leaving"), ("b", "leaving")]
    other = Leaving(_View(leader=True))
    other.view.connected = {_Peer("127.0.0.1:7")}
    assert not other.admit(_Peer("127.0.0.1:7"), "leaving")  # not pysyncobj's
    assert other.left == {"127.0.0.1:7"}
    other.tick(now=1.0)
    assert other.left == {"127.0.0.1:7"}  # still connected: still leaving
    other.view.connected = set()
    other.tick(now=2.0)
    assert other.left == frozenset()  # gone: started again, it is a member like any
