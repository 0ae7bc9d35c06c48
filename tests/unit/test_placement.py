"""Unit tests for jm/policy/members/placement.py: the pure least-loaded placement policy."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as hs

from jm.policy.members.placement import PeerLoad, Waiting, place


def W(job, slots=1, epoch=0):
    return Waiting(job, slots, epoch)


def P(node, slots, used=0):
    return PeerLoad(node, slots, used)


def test_nothing_to_place():
    assert place([], [P("a", 2)]) == []
    assert place([W("j")], []) == []


def test_least_loaded_share_first():
    # a: 1/2 used (50 %), b: 1/4 used (25 %) -> b
    assert place([W("j")], [P("a", 2, 1), P("b", 4, 1)]) == [("j", "b", 0)]


def test_share_beats_absolute_free_slots():
    # a: 0/1 (0 %, 1 free), b: 1/10 (10 %, 9 free) -> a (lower share)
    assert place([W("j")], [P("a", 1, 0), P("b", 10, 1)]) == [("j", "a", 0)]


def test_tie_on_share_broken_by_more_free_slots():
    # both empty: b has more free slots
    assert place([W("j")], [P("a", 2), P("b", 4)]) == [("j", "b", 0)]


def test_full_tie_spreads_jobs_placed_one_at_a_time():
    # idle equal peers, each job placed alone (short jobs): ties must not always pick one
    peers = [P("n2", 4), P("n1", 4), P("n3", 4)]
    chosen = [place([W(f"job-{i}")], peers)[0][1] for i in range(300)]
    counts = {n: chosen.count(n) for n in ("n1", "n2", "n3")}
    assert all(60 < c < 140 for c in counts.values()), counts
    assert place([W("job-7")], peers) == place([W("job-7")], list(reversed(peers)))


def test_deterministic_regardless_of_peer_order():
    peers = [P("c", 3, 1), P("a", 3, 1), P("b", 3, 1)]
    waiting = [W(f"j{i}") for i in range(5)]
    first = place(waiting, peers)
    assert first == place(waiting, list(reversed(peers)))
    per_node = {n: [j for j, m, _ in first if m == n] for n in "abc"}
    assert sorted(len(v) for v in per_node.values()) == [1, 2, 2]


def test_spreads_in_submission_order():
    out = place([W("j1"), W("j2"), W("j3"), W("j4")], [P("a", 2), P("b", 2)])
    assert [j for j, _, _ in out] == ["j1", "j2", "j3", "j4"]
    nodes = [n for _, n, _ in out]
    assert nodes.count("a") == 2 and nodes.count("b") == 2
    assert nodes[0] != nodes[1] and nodes[2] != nodes[3]  # alternates as load grows


def test_slot_limits_respected_and_rest_waits():
    out = place([W(f"j{i}") for i in range(5)], [P("a", 1), P("b", 2)])
    assert out == [("j0", "b", 0), ("j1", "a", 0), ("j2", "b", 0)]


def test_job_that_fits_nowhere_waits_smaller_ones_go():
    out = place([W("big", 3), W("small", 1)], [P("a", 2), P("b", 2, 1)])
    assert out == [("small", "a", 0)]


def test_multi_slot_job_needs_free_slots_on_one_peer():
    # 2 free slots in total, but split across peers
    assert place([W("j", 2)], [P("a", 2, 1), P("b", 2, 1)]) == []


def test_exact_fit():
    assert place([W("j", 3)], [P("a", 4, 1)]) == [("j", "a", 0)]


def test_expected_epoch_passed_through():
    assert place([W("j", 1, 7)], [P("a", 1)]) == [("j", "a", 7)]


def test_full_and_overcommitted_peers_get_nothing():
    assert place([W("j")], [P("a", 2, 2), P("b", 1, 3)]) == []


def test_inputs_not_mutated():
    waiting = [W("j1"), W("j2")]
    peers = [P("a", 2)]
    place(waiting, peers)
    assert waiting == [W("j1"), W("j2")] and peers == [P("a", 2)]


@settings(max_examples=200, deadline=None)
@given(hs.lists(hs.tuples(hs.integers(1, 4), hs.integers(0, 4)), min_size=0, max_size=5),
       hs.lists(hs.integers(1, 4), max_size=12))
def test_property_placement_respects_capacity_and_is_maximal(peer_specs, job_slots):
    peers = [P(f"n{i}", slots, min(used, slots)) for i, (slots, used) in enumerate(peer_specs)]
    waiting = [W(f"j{i}", s, i) for i, s in enumerate(job_slots)]
    out = place(waiting, peers)
    used = {p.node: p.used for p in peers}
    sizes = {w.job_id: w.slots for w in waiting}
    seen = set()
    for job_id, node, epoch in out:
        assert job_id not in seen
        seen.add(job_id)
        assert epoch == int(job_id[1:])
        used[node] += sizes[job_id]
    for p in peers:
        assert used[p.node] <= p.slots
    # a job left waiting did not fit anywhere at the time (so also not at the end)
    for w in waiting:
        if w.job_id not in seen:
            assert all(p.slots - used[p.node] < w.slots for p in peers)
    # placed jobs keep submission order
    order = [int(j[1:]) for j, _, _ in out]
    assert order == sorted(order)


def test_pack_fills_one_peer_before_the_next():
    out = place([W(f"j{i}") for i in range(5)], [P("a", 3), P("b", 3)], mode="pack")
    nodes = [n for _, n, _ in out]
    first = nodes[0]
    assert nodes[:3] == [first] * 3 and set(nodes[3:]) == {"b" if first == "a" else "a"}


def test_pack_prefers_the_fuller_peer():
    assert place([W("j")], [P("a", 4, 1), P("b", 4, 3)], mode="pack") == [("j", "b", 0)]


def test_leader_only_uses_the_leader_and_waits_when_it_is_full():
    peers = [P("a", 2), P("b", 8), P("c", 8)]
    out = place([W(f"j{i}") for i in range(4)], peers, mode="leader-only", leader="a")
    assert out == [("j0", "a", 0), ("j1", "a", 0)]  # the rest waits, standbys stay idle
    assert place([W("j")], peers, mode="leader-only", leader=None) == []


def test_ready_peers_before_peers_whose_spark_is_starting():
    peers = [PeerLoad("cold", 4, 0, ready=False), PeerLoad("warm", 4, 3)]
    assert place([Waiting("j", 1, 0)], peers) == [("j", "warm", 0)]
    # a full ready peer does not block: the job goes to the starting one
    peers = [PeerLoad("cold", 4, 0, ready=False), PeerLoad("warm", 4, 4)]
    assert place([Waiting("j", 1, 0)], peers) == [("j", "cold", 0)]
    assert place([Waiting("j", 1, 0)], [PeerLoad("cold", 4, 0, ready=False),
                                        PeerLoad("warm", 4, 1)], "pack") == [("j", "warm", 0)]


def test_by_tenant_keeps_a_tenant_together_and_spills_only_when_its_peers_are_full():
    P, W, pl = PeerLoad, Waiting, place
    peers = [P("n1", 4, 0), P("n2", 4, 1), P("n3", 4, 2)]
    jobs = [W(f"a{i}", 1, 1, "a") for i in range(5)] + [W("b0", 1, 1, "b"), W("b1", 1, 1, "b")]
    got = dict((j, n) for j, n, _ in pl(jobs, peers, "by-tenant", hosting={"n3": {"a"}}))
    # a's first goes where a runs already (the fullest peer); two fill n3, the rest spill
    # together to the least-loaded peer, n1; b starts on the least-loaded peer left
    assert [got[f"a{i}"] for i in range(5)] == ["n3", "n3", "n1", "n1", "n1"], got
    assert got["b0"] == got["b1"] == "n2", got
    spread = dict((j, n) for j, n, _ in pl(jobs, peers, "spread"))
    assert len({spread[f"a{i}"] for i in range(5)}) == 3  # spread: a on every peer


def test_a_tenants_jobs_avoid_peers_whose_host_lacks_its_os_user():
    lacking = frozenset({"a"})
    peers = [PeerLoad("n1", 4, 0, lacks=lacking), PeerLoad("n2", 4, 3),
             PeerLoad("n3", 4, 0, lacks=lacking)]
    jobs = [Waiting("a0", 1, 1, "a"), Waiting("a1", 1, 1, "a"), Waiting("b0", 1, 1, "b")]
    for mode in ("spread", "pack", "by-tenant"):
        got = dict((j, n) for j, n, _ in place(jobs, peers, mode))
        # a's first takes n2's last slot; the second waits for room there rather than go
        # to an emptier peer that cannot run it; b is not held back
        assert got.get("a0") == "n2" and "a1" not in got, (mode, got)
        assert got["b0"] in ("n1", "n3"), (mode, got)


def test_a_job_no_peer_can_run_as_its_user_is_placed_to_fail_with_that_error():
    peers = [PeerLoad("n1", 2, 0, lacks=frozenset({"a"})),
             PeerLoad("n2", 2, 1, lacks=frozenset({"a", "b"}))]
    got = place([Waiting("a0", 1, 1, "a")], peers)
    assert got == [("a0", "n1", 1)]  # (its attempt says UserNotFound: it does not wait)
