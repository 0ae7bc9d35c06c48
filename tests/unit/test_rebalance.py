"""Unit and property tests for the pure rebalancing and drain policy
(jm/policy/members/rebalance.py)."""
from __future__ import annotations

from collections import Counter

from hypothesis import given, settings, strategies as hs

from jm.policy.members.rebalance import (JobInfo, PeerInfo, deviations, plan_drain,
                                         plan_rebalance, spread)


def cluster(layout: dict[str, int], slots: int = 8, weights: dict | None = None,
            ineligible: set = frozenset(), job_slots: int = 1):
    jobs, peers = [], []
    for node, n in layout.items():
        for i in range(n):
            jobs.append(JobInfo(f"{node}-j{i}", node, job_slots, 1))
        peers.append(PeerInfo(node, slots, (weights or {}).get(node, float(slots)),
                              n * job_slots, node not in ineligible))
    return peers, jobs


def apply(peers, jobs, moves):
    where = {j.job_id: j.node for j in jobs}
    for m in moves:
        assert where[m.job_id] == m.source
        where[m.job_id] = m.target
    jobs = [JobInfo(j.job_id, where[j.job_id], j.slots, j.epoch + (where[j.job_id] != j.node),
                    j.movable) for j in jobs]
    used = Counter()
    for j in jobs:
        used[j.node] += j.slots
    peers = [PeerInfo(p.node, p.slots, p.weight, used[p.node], p.eligible) for p in peers]
    return peers, jobs


def test_new_empty_peer_gets_its_share():
    peers, jobs = cluster({"a": 3, "b": 3, "c": 0})
    moves = plan_rebalance(peers, jobs, threshold=1, limit=10)
    assert len(moves) == 2 and {m.target for m in moves} == {"c"}
    peers, _ = apply(peers, jobs, moves)
    assert sorted(p.used for p in peers) == [2, 2, 2]


def test_balanced_moves_nothing():
    peers, jobs = cluster({"a": 3, "b": 2, "c": 2})
    assert plan_rebalance(peers, jobs, threshold=1, limit=10) == []
    peers, jobs = cluster({"a": 4, "b": 2})
    assert plan_rebalance(peers, jobs, threshold=2, limit=10) == []


def test_limit_and_unmovable_jobs():
    peers, jobs = cluster({"a": 6, "b": 0})
    assert len(plan_rebalance(peers, jobs, 1, limit=1)) == 1
    frozen = [JobInfo(j.job_id, j.node, j.slots, j.epoch, movable=False) for j in jobs]
    assert plan_rebalance(peers, frozen, 1, limit=5) == []


def test_weights_shift_the_share():
    peers, jobs = cluster({"a": 6, "b": 0}, weights={"a": 1.0, "b": 2.0})
    peers, _ = apply(peers, jobs, plan_rebalance(peers, jobs, 1, 10))
    assert {p.node: p.used for p in peers} == {"a": 2, "b": 4}


def test_ineligible_peers_neither_give_nor_take():
    peers, jobs = cluster({"a": 4, "b": 0, "c": 0}, ineligible={"c"})
    moves = plan_rebalance(peers, jobs, 1, 10)
    assert {m.target for m in moves} == {"b"} and len(moves) == 2


def test_big_jobs_move_only_when_it_helps():
    peers, jobs = cluster({"a": 1, "b": 0}, job_slots=2)
    # moving the 2-slot job would just swap the imbalance
    assert plan_rebalance(peers, jobs, 0, 10) == []


def test_drain_moves_everything_movable_within_limit():
    peers, jobs = cluster({"a": 3, "b": 1, "c": 1})
    moves = plan_drain(peers, jobs, {"a"}, limit=10)
    assert sorted(m.job_id for m in moves) == ["a-j0", "a-j1", "a-j2"]
    assert all(m.source == "a" and m.target in ("b", "c") for m in moves)
    assert len(plan_drain(peers, jobs, {"a"}, limit=2)) == 2
    assert plan_drain(peers, jobs, {"a"}, limit=0) == []


def test_drain_respects_capacity_and_placement_mode():
    peers, jobs = cluster({"a": 3, "b": 1, "c": 1}, slots=2)
    moves = plan_drain(peers, jobs, {"a"}, limit=10)
    assert len(moves) == 2  # one free slot on b and on c
    moves = plan_drain(peers, jobs, {"a"}, limit=10, mode="leader-only", leader="b")
    assert [m.target for m in moves] == ["b"]


def test_moves_avoid_a_peer_whose_host_lacks_the_jobs_tenants_user():
    peers = [PeerInfo("a", 8, 8.0, 4), PeerInfo("b", 8, 8.0, 0, lacks=frozenset({"t"})),
             PeerInfo("c", 8, 8.0, 0)]
    jobs = [JobInfo(f"j{i}", "a", 1, 1, tenant="t") for i in range(4)]
    assert {m.target for m in plan_rebalance(peers, jobs, threshold=0, limit=10)} == {"c"}
    assert {m.target for m in plan_drain(peers, jobs, {"a"}, limit=10)} == {"c"}
    others = [JobInfo(f"k{i}", "a", 1, 1, tenant="u") for i in range(4)]
    assert "b" in {m.target for m in plan_rebalance(peers, others, threshold=0, limit=10)}


# ---- properties ----------------------------------------------------------------------------
layouts = hs.dictionaries(hs.sampled_from("abcdef"), hs.integers(0, 12), min_size=1, max_size=6)


@settings(max_examples=300, deadline=None)
@given(layout=layouts, slots=hs.integers(1, 16), threshold=hs.sampled_from([0, 0.5, 1, 2, 3]),
       limit=hs.integers(0, 6), weights=hs.dictionaries(hs.sampled_from("abcdef"),
                                                        hs.floats(0.5, 4.0)))
def test_round_never_exceeds_slots_or_limit(layout, slots, threshold, limit, weights):
    layout = {n: min(c, slots) for n, c in layout.items()}
    peers, jobs = cluster(layout, slots, {n: weights.get(n, float(slots)) for n in layout})
    moves = plan_rebalance(peers, jobs, threshold, limit)
    assert len(moves) <= limit
    assert len({m.job_id for m in moves}) == len(moves)
    after, _ = apply(peers, jobs, moves)
    assert all(p.used <= p.slots for p in after)
    if spread(peers) <= threshold:
        assert moves == []


def _potential(peers):
    return sum(d * d for d in deviations(peers).values())


@settings(max_examples=300, deadline=None)
@given(layout=layouts, threshold=hs.sampled_from([0, 0.5, 1, 2, 3]), limit=hs.integers(1, 4),
       weights=hs.dictionaries(hs.sampled_from("abcdef"), hs.floats(0.5, 4.0)))
def test_rounds_converge_within_the_threshold(layout, threshold, limit, weights):
    slots = 100  # room everywhere: only the policy limits the outcome
    peers, jobs = cluster(layout, slots, {n: weights.get(n, 1.0) for n in layout})
    for _ in range(200):
        moves = plan_rebalance(peers, jobs, threshold, limit)
        if not moves:
            break
        before = _potential(peers)
        peers, jobs = apply(peers, jobs, moves)
        assert _potential(peers) < before - 1e-9  # every round makes real progress
    else:
        raise AssertionError("rebalancing did not converge")
    # unit jobs can always get within one slot of the fair share
    assert spread(peers) <= max(threshold, 1) + 1e-9


@settings(max_examples=200, deadline=None)
@given(layout=layouts, slots=hs.integers(1, 16), limit=hs.integers(0, 20),
       drained=hs.sets(hs.sampled_from("abcdef"), min_size=1, max_size=3))
def test_drain_properties(layout, slots, limit, drained):
    layout = {n: min(c, slots) for n, c in layout.items()}
    peers, jobs = cluster(layout, slots)
    moves = plan_drain(peers, jobs, set(drained), limit)
    assert len(moves) <= limit
    assert all(m.source in drained and m.target not in drained for m in moves)
    after, _ = apply(peers, jobs, moves)
    assert all(p.used <= p.slots for p in after)
    free_elsewhere = sum(p.slots - p.used for p in peers if p.node not in drained)
    leaving = sum(layout.get(n, 0) for n in drained)
    assert len(moves) == min(limit, leaving, free_elsewhere)
