"""Unit tests for the leader's lease rounds: one LeaseRound entry carries many peers'
heartbeats with one Result each (raft/state.py), a heartbeat's JSON body is checked
(jm/cluster/members/beats.py), the batcher's linger makes one command of what arrives in it, and
the ResourceManager counts every heartbeat of an applied round as a sign of life, and a
replica that does not apply the rounds acknowledged to it stops sending heartbeats."""
from __future__ import annotations

import asyncio

import pytest

from jm.cluster.batcher import Batcher
from jm.cluster.members.beats import beat_body, parse_beat, stuck_round
from raft import commands as c
from raft.state import ClusterState, Result


def registered(*nodes):
    st = ClusterState()
    for i, n in enumerate(nodes):
        assert st.apply(c.RegisterPeer(n, "h", 8000 + i, 9000 + i, 1, 2, 1.0)).ok
    return st


def test_a_round_renews_each_peer_and_refuses_only_the_stale_ones():
    st = registered("a", "b", "c")
    assert st.apply(c.DeclarePeerDead("c", 2.0)).ok
    before = {n: st.peers[n].beats for n in "abc"}
    res = st.apply(c.LeaseRound((c.Heartbeat("a", 3.0), c.Heartbeat("b", 3.1, False, "low"),
                                 c.Heartbeat("c", 3.2), c.Heartbeat("zz", 3.3))))
    assert res.ok
    assert [(r.ok, r.code) for r in res.value] == [(True, None), (True, None),
                                                   (False, "stale"), (False, "not-found")]
    assert (st.peers["a"].beats, st.peers["a"].last_heartbeat) == (before["a"] + 1, 3.0)
    assert st.peers["b"].ready is False and st.peers["b"].disk_low == "low"
    assert st.peers["c"].beats == before["c"]  # dead: it must register again


def test_a_heartbeat_body_round_trips_and_bad_ones_are_named():
    hb = c.Heartbeat("h:1", 12.5, False, "disk low", ("etl", "bi"))
    assert parse_beat(beat_body(hb)) == (hb, False)
    # an older peer's body names no tenants it lacks
    assert parse_beat({"node": "n", "time": 1.0})[0].lacks == ()
    assert parse_beat(beat_body(hb, urgent=True)) == (hb, True)
    for bad, words in [([], "JSON object"), ({"time": 1.0}, "node"),
                       ({"node": "n", "time": "x"}, "time"), ({"node": "n", "time": True}, "time"),
                       ({"node": "n", "time": float("nan")}, "time"),
                       ({"node": "n", "time": 1.0, "ready": "yes"}, "ready"),
                       ({"node": "n", "time": 1.0, "disk-low": "x" * 600}, "disk-low"),
                       ({"node": "n", "time": 1.0, "urgent": 1}, "urgent"),
                       ({"node": "n", "time": 1.0, "lacks": "etl"}, "lacks"),
                       ({"node": "n", "time": 1.0, "lacks": [3]}, "lacks"),
                       ({"node": "n", "time": 1.0, "lacks": ["a"] * 1001}, "lacks")]:
        with pytest.raises(ValueError) as exc:
            parse_beat(bad)
        assert words in str(exc.value)


class FakeRaft:
    """Pure stand-in: applies each submitted command to a ClusterState, counting them
    (as the log holds it: encoded and decoded, as RaftHost.submit and every replica do)."""

    def __init__(self, st):
        self.st, self.commands = st, []

    async def submit(self, command, timeout):
        command = c.decode(c.encode(command))
        self.commands.append(command)
        return self.st.apply(command)

    def protocol(self):
        return self.st.protocol


def _rounds(raft, **waits) -> Batcher:
    """The leader's batcher of heartbeats into LeaseRounds, with its waits."""
    return Batcher(raft, lambda beats: c.LeaseRound(tuple(beats)), 1.0, retry=False, **waits)


def test_the_linger_makes_one_round_of_what_arrives_in_it():
    st = registered("a", "b", "c")
    raft = FakeRaft(st)

    async def main():
        b = _rounds(raft, linger=0.05)
        b.start()
        out = await asyncio.gather(*(b.submit(c.Heartbeat(n, 5.0)) for n in "abc"))
        await b.close()
        return out
    results = asyncio.run(main())
    assert [r.ok for r in results] == [True, True, True]
    assert len(raft.commands) == 1 and len(raft.commands[0].beats) == 3


def test_an_urgent_heartbeat_cuts_the_linger_short():
    st = registered("a")
    raft = FakeRaft(st)

    async def main():
        b = _rounds(raft, linger=30.0)  # a linger longer than the test's own timeout
        b.start()
        res = await asyncio.wait_for(b.submit(c.Heartbeat("a", 5.0), urgent=True), 10)
        await b.close()
        return res
    assert asyncio.run(main()).ok and len(raft.commands) == 1


def test_the_resource_manager_counts_each_heartbeat_of_a_round():
    from jm.cluster.members.resourcemanager import ResourceManager

    class Raft:
        apply_hooks, load_hooks = [], []

        def subscribe(self):
            return asyncio.Event()

    clock = iter([7.0, 8.0])
    rm = ResourceManager(Raft(), 3.0, 1.0, monotonic=lambda: next(clock))
    cmd = c.LeaseRound((c.Heartbeat("a", 1.0), c.Heartbeat("b", 1.0)))
    rm._on_apply(cmd, Result(True, [Result(True), Result.fail("stale", "dead")]))
    assert rm.last_seen == {"a": 7.0}


def test_a_replica_that_does_not_apply_acknowledged_rounds_stops_heartbeats():
    acks = ((10, 100.0), (12, 100.5))
    # applied up to 10: round 12 waits, acknowledged 0.5 s ago: not stuck yet
    left, late = stuck_round(acks, 10, 101.0, 2.0)
    assert left == ((12, 100.5),) and late is None
    # still at 10 more than the lease later: stuck on 12
    assert stuck_round(acks, 10, 102.6, 2.0) == (((12, 100.5),), 12)
    # it caught up: nothing waits, heartbeats go on
    assert stuck_round(acks, 12, 110.0, 2.0) == ((), None)
    # the oldest unapplied decides
    assert stuck_round(acks, 5, 102.2, 2.0)[1] == 10


def test_gather_waits_only_while_busy_and_an_urgent_item_cuts_it_short():
    st = registered("a", "b", "c")
    raft = FakeRaft(st)

    async def main():
        b = _rounds(raft, gather=30.0)  # a wait longer than the test's own timeout
        b.start()
        # at rest (no batch before): the first item goes at once
        first = await asyncio.wait_for(b.submit(c.Heartbeat("a", 5.0)), 10)
        # busy (a batch ended just now): an urgent item still goes at once
        second = await asyncio.wait_for(b.submit(c.Heartbeat("b", 5.0), urgent=True), 10)
        await b.close()
        return first, second
    first, second = asyncio.run(main())
    assert first.ok and second.ok and len(raft.commands) == 2


def test_gather_makes_one_command_of_what_arrives_while_busy():
    st = registered("a", "b", "c")
    raft = FakeRaft(st)

    async def main():
        b = _rounds(raft, gather=1.0)
        b.start()
        await b.submit(c.Heartbeat("a", 5.0))  # a batch ended: busy for the next second
        later = asyncio.ensure_future(b.submit(c.Heartbeat("b", 5.0)))
        await asyncio.sleep(0.05)  # (a second caller, a moment after the first)
        last = await b.submit(c.Heartbeat("c", 5.0))
        await b.close()
        return await later, last
    results = asyncio.run(main())
    assert all(r.ok for r in results)
    assert [len(cmd.beats) for cmd in raft.commands] == [1, 2]


def test_gather_after_holds_the_next_batch_only_after_a_large_one():
    st = registered("a", "b", "c", "d")
    raft = FakeRaft(st)

    async def main():
        b = _rounds(raft, gather=30.0, gather_after=2)  # a wait longer than the timeout
        b.start()
        # busy (a batch just ended) but it held one item: the next goes at once
        await asyncio.wait_for(b.submit(c.Heartbeat("a", 5.0)), 10)
        await asyncio.wait_for(b.submit(c.Heartbeat("b", 5.0)), 10)
        # two at once make a batch of two: the next one is gathered (cut short here)
        await asyncio.wait_for(asyncio.gather(b.submit(c.Heartbeat("a", 5.0)),
                                              b.submit(c.Heartbeat("b", 5.0))), 10)
        held = asyncio.ensure_future(b.submit(c.Heartbeat("c", 5.0)))
        done, _ = await asyncio.wait({held}, timeout=0.3)
        waited = not done
        await b.submit(c.Heartbeat("d", 5.0), urgent=True)
        await asyncio.wait_for(held, 10)
        await b.close()
        return waited
    assert asyncio.run(main())
    assert [len(cmd.beats) for cmd in raft.commands] == [1, 1, 2, 2]
