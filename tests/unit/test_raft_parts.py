"""The parts that steer a Raft node (raft/raftnode.py), on a stand-in for its NodeView:
pre-votes (raft/prevote.py) and a member catching up before it votes (raft/amnesia.py).
The same parts on real nodes: tests/integration/test_prevote.py, test_amnesia.py."""
from raft.amnesia import CatchingUp
from raft.leaving import FAR
from raft.prevote import PRE_VOTE, PRE_VOTE_RESPONSE, PreVote


class _View:
    def __init__(self, others=("b", "c")):
        self.term, self.is_leader, self.has_address, self.transferring = 3, False, True, False
        self.election_deadline, self.min_timeout, self.applied = 0.0, 1.0, 0
        self.others, self.sent = set(others), []
        self.last = (3, 10)

    def last_entry(self):
        return self.last

    def connected_to_anyone(self):
        return True

    def new_timeout(self):
        return 2.0

    def send(self, node, message):
        self.sent.append((node, message))


def test_no_election_without_a_majority_of_pre_votes():
    view = _View()
    pv = PreVote(view)
    view.election_deadline = 5.0
    assert pv.tick(now=4.0) is False and view.sent == []  # deadline not passed
    assert pv.tick(now=6.0) is False  # passed: asks everyone, campaigns not yet
    assert sorted(n for n, m in view.sent) == ["b", "c"]
    assert {m["type"] for _, m in view.sent} == {PRE_VOTE} and view.sent[0][1]["term"] == 4
    assert view.election_deadline == 8.0  # the next round after a new timeout
    refused = {"type": PRE_VOTE_RESPONSE, "term": 4, "granted": False}
    assert pv.admit("b", PRE_VOTE_RESPONSE, refused, now=6.1) is False  # (consumed)
    assert not pv.go and view.election_deadline == 8.0
    granted = dict(refused, granted=True)
    pv.admit("c", PRE_VOTE_RESPONSE, granted, now=6.2)  # with its own: 2 of 3
    assert pv.go and view.election_deadline == 0
    assert pv.tick(now=6.3) is True and not pv.go  # pysyncobj campaigns in this tick


def test_a_stale_grant_and_a_leader_heard_stop_a_campaign():
    view = _View(others=("b", "c", "d", "e"))
    pv = PreVote(view)
    pv.tick(now=1.0)
    pv.admit("b", PRE_VOTE_RESPONSE, {"type": PRE_VOTE_RESPONSE, "term": 3, "granted": True},
             now=1.1)  # an older round's
    pv.admit("c", PRE_VOTE_RESPONSE, {"type": PRE_VOTE_RESPONSE, "term": 4, "granted": True},
             now=1.2)
    assert not pv.go  # 2 of 5
    assert pv.admit("b", "append_entries", {"type": "append_entries", "term": 3}, now=1.3)
    assert pv.leader_heard == 1.3


def test_a_pre_vote_is_granted_only_when_no_leader_is_heard_and_the_log_is_as_new():
    view = _View()
    pv = PreVote(view)
    ask = {"type": PRE_VOTE, "term": 4, "last_log_term": 3, "last_log_index": 10}
    assert pv.admit("b", PRE_VOTE, ask, now=10.0) is False
    pv.admit("b", "append_entries", {"type": "append_entries", "term": 3}, now=10.5)
    pv.admit("b", PRE_VOTE, ask, now=11.0)  # a leader heard 0.5 s ago
    pv.admit("b", PRE_VOTE, dict(ask, last_log_index=9), now=20.0)  # a shorter log
    pv.admit("b", PRE_VOTE, {"type": PRE_VOTE, "term": "x"}, now=20.0)  # unreadable: none
    assert [m["granted"] for _, m in view.sent] == [True, False, False]


def test_a_leader_behind_this_members_term_is_told_at_most_once_a_timeout():
    view = _View()
    pv = PreVote(view)
    for now in (1.0, 1.5, 2.1):
        assert pv.admit("L", "append_entries", {"type": "append_entries", "term": 2}, now)
    assert [(n, m["type"], m["term"]) for n, m in view.sent] == [
        ("L", "request_vote", 3), ("L", "request_vote", 3)]
    reader = PreVote(_View())
    reader.view.has_address = False  # a non-voting member tells no one
    reader.admit("L", "append_entries", {"type": "append_entries", "term": 2}, 1.0)
    assert reader.view.sent == []


def test_a_leader_or_a_transfer_leaves_the_election_to_pysyncobj():
    for attr in ("is_leader", "transferring"):
        view = _View()
        setattr(view, attr, True)
        assert PreVote(view).tick(now=100.0) is True and view.sent == []


def test_a_member_catching_up_votes_once_it_applied_the_leaders_commit_index():
    view = _View()
    part = CatchingUp(view, no_vote=True)
    assert not part.voting
    for kind in ("request_vote", "timeout_now", "pre_vote"):
        assert part.admit(kind, {"type": kind}) is False
    part.tick(now=1.0)
    assert view.election_deadline == 1.0 + FAR
    assert part.admit("append_entries", {"type": "append_entries", "commit_index": 7})
    assert part.target == 7
    part.admit("append_entries", {"type": "append_entries", "commit_index": 9})
    assert part.target == 7  # the first leader's word counts
    view.applied = 6
    part.tick(now=2.0)
    assert not part.voting and view.election_deadline == 2.0 + FAR
    view.applied = 7
    part.tick(now=3.0)
    assert part.voting and view.election_deadline == 4.0
    assert part.admit("request_vote", {"type": "request_vote"})
    assert CatchingUp(_View(), no_vote=False).voting
