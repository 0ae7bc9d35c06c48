"""The voting core (jm/policy/members/voters.py): how many of conf/masters vote, the configuration
errors of raft.voters, and the role a starting peer takes from what the seeds answer, its
saved members file, or conf/masters."""
import subprocess
import sys

import pytest

from jm.cluster.members.membership import load_members, save_members
from jm.config import ConfigError, load_config
from jm.policy.members.voters import NON_VOTING, VOTER, SeedMembers, VotersError, start_role, \
    voter_count
from tests.helpers import ROOT


def test_the_voter_count_is_odd_and_at_most_the_members():
    assert [voter_count(None, n) for n in (1, 2, 3, 4, 25)] == [1, 1, 3, 3, 3]
    assert voter_count(5, 9) == 5 and voter_count(1, 9) == 1
    for bad, why in ((4, "even"), (0, "at least 1"), (7, "more than the 5")):
        with pytest.raises(VotersError, match=f"raft.voters: .*{why}"):
            voter_count(bad, 5)


def test_an_even_or_zero_raft_voters_is_a_configuration_error(tmp_path):
    with pytest.raises(ConfigError, match="raft.voters: 4 is even"):
        load_config(str(tmp_path), {"raft.voters": 4})
    with pytest.raises(ConfigError, match="raft.voters: must be at least 1"):
        load_config(str(tmp_path), {"raft.voters": 0})
    assert load_config(str(tmp_path), {"raft.voters": "5"})["raft.voters"] == 5


def test_a_peer_exits_2_naming_the_key_when_raft_voters_exceeds_the_members(tmp_path):
    (tmp_path / "masters").write_text("127.0.0.1:18081:16123\n127.0.0.1:18082:16124\n")
    (tmp_path / "config.yaml").write_text("raft.voters: 3\n")
    r = subprocess.run([sys.executable, "-m", "jm.peer", "--conf-dir", str(tmp_path),
                        "--peer", "127.0.0.1:18081:16123"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("jobmanager: configuration error: "
                                                        "raft.voters: 3 is more than the 2")
    assert "Traceback" not in r.stderr


MASTERS = ["h:1", "h:2", "h:3", "h:4", "h:5"]


def test_a_new_cluster_votes_with_its_first_lines():
    assert start_role("h:2", MASTERS, None, None, 3) == (VOTER, ["h:1", "h:2", "h:3"])
    assert start_role("h:5", MASTERS, None, None, 3) == (NON_VOTING, ["h:1", "h:2", "h:3"])


def test_the_seeds_say_the_role_and_a_stranger_is_refused():
    seed = SeedMembers(("h:1", "h:2", "h:4"), ("h:9",), ("h:5",))
    # the voters changed since the cluster was made: the seeds know, not conf/masters
    assert start_role("h:4", MASTERS, seed, None, 3) == (VOTER, ["h:1", "h:2", "h:4"])
    assert start_role("h:3", MASTERS, seed, None, 3)[0] == NON_VOTING  # a line never removed
    assert start_role("h:9", MASTERS, seed, None, 3)[0] == NON_VOTING  # added as non-voter
    with pytest.raises(VotersError, match="h:5 is not a member"):
        start_role("h:5", MASTERS, seed, None, 3)  # removed
    with pytest.raises(VotersError, match="h:7 is not a member"):
        start_role("h:7", MASTERS, seed, None, 3)
    # no seed answers: what it saved wins over conf/masters
    assert start_role("h:5", MASTERS, None, (["h:1", "h:2", "h:5"], VOTER), 3) == \
        (VOTER, ["h:1", "h:2", "h:5"])


def test_the_members_file_keeps_the_role(tmp_path):
    assert load_members(str(tmp_path)) is None
    save_members(str(tmp_path), ["h:2", "h:1"], NON_VOTING)
    assert load_members(str(tmp_path)) == (["h:1", "h:2"], NON_VOTING)
    (tmp_path / "members").write_text('{"members": ["h:1"]}')  # written before roles
    assert load_members(str(tmp_path)) == (["h:1"], VOTER)
    (tmp_path / "members").write_text('{"members": ["h:1"], "role": "king"}')
    assert load_members(str(tmp_path)) is None


def view(node, alive=True, dead_since=None, **kw):
    from jm.policy.members.voters import PeerView
    return PeerView(node, alive, dead_since, **kw)


def test_the_core_replaces_a_voter_dead_past_the_limit_and_stays_odd():
    from jm.policy.members.voters import core_step
    voters = ["a", "b", "c"]
    peers = [view("a"), view("b"), view("c", False, 100.0), view("d"), view("e")]
    # dead 20 s of 30: nothing yet; at 30 s it leaves the voters (d can take its place)
    assert core_step(voters, peers, 3, 120.0, 30.0, "a") is None
    assert core_step(voters, peers, 3, 130.0, 30.0, "a") == ("demote", "c")
    # no live non-voter to take its place: it stays
    assert core_step(voters, peers[:3], 3, 500.0, 30.0, "a") is None
    # two voters left: a live non-voter (not draining, leaving or held off) is promoted
    assert core_step(["a", "b"], peers, 3, 130.0, 30.0, "a") == ("promote", "d")
    assert core_step(["a", "b"], peers, 3, 130.0, 30.0, "a", frozenset({"d"})) == \
        ("promote", "e")
    busy = [view("a"), view("b"), view("d", draining=True), view("e", leaving=True)]
    assert core_step(["a", "b"], busy, 3, 130.0, 30.0, "a") is None
    # one voter and one candidate: 2 voters would stop at either loss; with two, both go
    assert core_step(["a"], [view("a"), view("d")], 3, 0.0, 30.0, "a") is None
    assert core_step(["a"], [view("a"), view("d"), view("e")], 3, 0.0, 30.0, "a") == \
        ("promote", "d")
    # the target reached: nothing; the leader is never demoted
    assert core_step(voters, [view("a", False, 0.0), view("d")], 3, 99.0, 1.0, "a") is None


def test_a_promotion_is_refused_with_the_reason():
    from jm.policy.members.voters import promotion_refusal
    assert promotion_refusal("a", ["a", "b"], 3, view("a")) == (409, "a is a voter already")
    assert promotion_refusal("x", ["a", "b"], 3, None)[0] == 404
    assert "core is full" in promotion_refusal("d", ["a", "b", "c"], 3, view("d"))[1]
    assert promotion_refusal("d", ["a", "b"], 3, view("d", False, 1.0)) == \
        (409, "d is not alive")
    assert "draining" in promotion_refusal("d", ["a", "b"], 3, view("d", draining=True))[1]
    assert promotion_refusal("d", ["a", "b"], 3, view("d")) is None


def test_only_a_committed_removal_in_its_own_cluster_proves_a_removal():
    from jm.policy.members.voters import removal_proven
    seed = SeedMembers(("h:1",), (), ("h:5",), "cluster-a")
    assert removal_proven("h:5", seed, "cluster-a")
    assert not removal_proven("h:5", seed, "cluster-b")       # another cluster's word
    assert not removal_proven("h:5", seed, None)              # data of unknown cluster
    assert not removal_proven("h:6", seed, "cluster-a")       # never removed: not a member
    assert not removal_proven("h:5", SeedMembers(("h:1",), (), ("h:5",)), None)


def test_a_voter_s_removal_is_settled_once_its_place_is_taken_or_cannot_be():
    from jm.policy.members.voters import core_after_removal
    peers = [view("a"), view("b"), view("c", alive=False, dead_since=0.0), view("d")]
    # the removed voter still counts: not settled
    core = core_after_removal("c", ["a", "b", "c"], peers, 3, 10.0, "a")
    assert not core.settled and "still counts" in core.note
    # out of the voters, d (live non-voter) to be promoted: not yet
    core = core_after_removal("c", ["a", "b"], peers, 3, 10.0, "a")
    assert not core.settled and "d is to take its place" in core.note
    # d promoted: whole
    core = core_after_removal("c", ["a", "b", "d"], peers, 3, 10.0, "a")
    assert core.settled and core.whole and core.note == ""
    # no live non-voter: settled, short, and said
    lone = [view("a"), view("b"), view("d", alive=False, dead_since=0.0)]
    core = core_after_removal("c", ["a", "b"], lone, 3, 10.0, "a")
    assert core.settled and not core.whole and "the voting core is short: 2 voters" in core.note
    # a draining non-voter does not take the place either
    core = core_after_removal("c", ["a", "b"], [view("a"), view("b"), view("d", draining=True)],
                              3, 10.0, "a")
    assert core.settled and not core.whole
