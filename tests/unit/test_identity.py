"""jm.policy.members.identity.decide: who may start as a voter."""
from jm.policy.members.identity import NON_VOTER, VOTER, WAIT, SeedView, decide

ME = "10.0.0.2:6123"
KNOWN = SeedView("c1", ("10.0.0.1:6123", ME))
NEW = SeedView("c1", ("10.0.0.1:6123",))
FRESH = SeedView(None, ())
STARTING_NEW = SeedView(None, (), starting=True)      # a starting peer without data
STARTING_OLD = SeedView("c1", (), starting=True)      # ... with the data of cluster c1


def test_a_peer_with_its_data_votes():
    assert decide(True, {"cluster-id": "c1", "node": ME}, ME, [KNOWN], False)[0] == VOTER
    assert decide(True, None, ME, [KNOWN], False)[0] == VOTER  # written by an older version
    assert decide(True, None, ME, [], False)[0] == VOTER


def test_data_of_another_peer_or_cluster_is_refused():
    mode, why = decide(True, {"cluster-id": "c1", "node": "10.0.0.1:6123"}, ME, [KNOWN], False)
    assert mode is None and "belongs to peer 10.0.0.1:6123" in why
    mode, why = decide(True, {"cluster-id": "c0", "node": ME}, ME, [KNOWN], False)
    assert mode is None and "cluster c0" in why and "c1" in why
    # seeds that know no cluster yet (all starting) are no contradiction
    assert decide(True, {"cluster-id": "c0", "node": ME}, ME, [FRESH], False)[0] == VOTER


def test_a_known_member_without_data_lost_it():
    mode, why = decide(False, None, ME, [NEW, KNOWN], False)
    assert mode is None and "--rejoin" in why and "remove-peer" in why
    assert decide(False, None, ME, [KNOWN], True)[0] == NON_VOTER


def test_a_new_peer_votes_and_rejoin_always_waits():
    assert decide(False, None, ME, [NEW], False)[0] == VOTER
    assert decide(False, None, ME, [FRESH, FRESH], False)[0] == VOTER
    assert decide(False, None, ME, [STARTING_NEW, STARTING_NEW], False)[0] == VOTER
    assert decide(False, None, ME, [], False, seeds=False)[0] == VOTER  # one peer alone
    assert decide(False, None, ME, [], True)[0] == NON_VOTER


def test_without_data_and_without_an_answer_that_can_tell_it_waits_then_refuses():
    """Fail closed: no seed answered, or only seeds still starting with a cluster's data
    (they cannot say yet whom it knows): a lost disk cannot be told from a new peer."""
    for views in ([], [STARTING_OLD], [STARTING_OLD, STARTING_NEW]):
        assert decide(False, None, ME, views, False, final=False)[0] == WAIT
        mode, why = decide(False, None, ME, views, False, final=True)
        assert mode is None and "--rejoin" in why and "Start the other peers" in why
    # one seed up with its replica answers for the cluster
    assert decide(False, None, ME, [STARTING_OLD, KNOWN], False, final=False)[0] is None
    assert decide(False, None, ME, [STARTING_OLD, NEW], False, final=False)[0] == VOTER
    assert decide(True, {"cluster-id": "c1", "node": ME}, ME, [KNOWN], True)[0] == NON_VOTER


def test_a_starting_seed_with_data_but_no_identity_yet_is_no_new_cluster():
    """A seed restarted before it wrote its identity file cannot name its cluster, but its
    Raft data says there is one: a wiped peer waits, and refuses once final."""
    data_no_id = SeedView(None, (), starting=True, has_data=True)
    assert decide(False, None, ME, [data_no_id, STARTING_NEW], False, final=False)[0] == WAIT
    mode, why = decide(False, None, ME, [data_no_id], False, final=True)
    assert mode is None and "--rejoin" in why
    assert decide(False, None, ME, [STARTING_NEW], False)[0] == VOTER  # a new cluster
