"""Unit tests for relayed submissions (raft/relay.py, jm/cluster/batcher.py's `offer`):
what a follower's tick sends to the leader and when it sends it again, how items are cut
into messages, and the leader's batcher putting relayed items into its own batches."""
from __future__ import annotations

import asyncio

from jm.cluster.batcher import Batcher
from raft import commands as c
from raft.relay import RESEND, RelayBook, messages, received_items
from raft.state import ClusterState, Result
from tests.unit.test_beats import FakeRaft


def test_each_item_goes_once_to_a_leader_and_again_to_a_new_one():
    book = RelayBook()
    book.add("j1", b"one", deadline=10.0)
    book.add("j2", b"two", deadline=10.0)
    assert book.due(None, 1.0) == []  # no leader known: kept, nothing sent
    assert book.due("L1", 1.1) == [b"one", b"two"]
    book.add("j3", b"three", deadline=10.0)
    assert book.due("L1", 1.2) == [b"three"]  # only what L1 has not had
    assert book.due("L1", 1.3) == []
    # the leader changed: the old one may have dropped what it was sent
    assert book.due("L2", 1.4) == [b"one", b"two", b"three"]
    book.forget("j2")  # applied here (or given up by its caller)
    assert book.due("L3", 1.5) == [b"one", b"three"]


def test_an_item_not_applied_goes_again_after_a_while_to_the_same_leader():
    book = RelayBook()
    book.add("j1", b"one", deadline=100.0)
    assert book.due("L", 1.0) == [b"one"]
    assert book.due("L", 1.0 + RESEND / 2) == []
    # (a leader that lost the lead for a moment and won it back dropped it meanwhile)
    assert book.due("L", 1.0 + RESEND) == [b"one"]
    assert book.due("L", 1.0 + RESEND + 0.1) == []


def test_an_item_past_its_deadline_is_dropped_unsent():
    book = RelayBook()
    book.add("late", b"late", deadline=2.0)
    book.add("fine", b"fine", deadline=9.0)
    assert book.due(None, 2.5) == []  # no leader until after its caller gave up
    assert book.due("L", 3.0) == [b"fine"]
    assert list(book.items) == ["fine"]


def test_items_are_cut_into_messages_by_size_in_order():
    blobs = [b"a" * 3, b"b" * 3, b"c" * 5, b"d", b"e" * 20]
    assert messages(blobs, 6) == [[b"aaa", b"bbb"], [b"ccccc", b"d"], [b"e" * 20]]
    assert messages([], 6) == []
    assert [b for m in messages(blobs, 1) for b in m] == blobs  # one each, none lost


def test_a_relay_message_is_read_only_when_well_formed():
    assert received_items({"type": "relay", "items": [b"x", b"y"]}) == [b"x", b"y"]
    for bad in ({"type": "relay"}, {"type": "relay", "items": b"x"},
                {"type": "relay", "items": [b"x", "y"]}, ["relay"], None):
        assert received_items(bad) is None, bad


async def test_the_leader_batches_relayed_items_with_its_own_clients():
    st = ClusterState()
    raft = FakeRaft(st)
    batcher = Batcher(raft, c.SubmitJobs, 5.0, retry=False, linger=0.05)
    batcher.start()
    try:
        spec = {"entry": "m:f"}
        mine = asyncio.create_task(batcher.submit(c.SubmitJob("own", spec, 1.0)))
        relayed = [c.SubmitJob(f"r{i}", spec, 1.0) for i in range(3)]
        for job in relayed:
            batcher.offer(job, c.encode(job))
        res = await mine
        assert res.ok and res.value["jobid"] == "own"
        assert len(raft.commands) == 1  # one entry for the leader's job and the relayed
        assert sorted(j.job_id for j in raft.commands[0].jobs) == ["own", "r0", "r1", "r2"]
        assert {"own", "r0", "r1", "r2"} <= set(st.jobs)
    finally:
        await batcher.close()


async def test_a_relayed_item_of_a_batch_that_failed_is_dropped_quietly(caplog):
    class Down(FakeRaft):
        async def submit(self, command, timeout):
            from raft.node import RaftUnavailable
            raise RaftUnavailable("not committed in time")
    batcher = Batcher(Down(ClusterState()), c.SubmitJobs, 5.0, retry=False)
    batcher.start()
    try:
        batcher.offer(c.SubmitJob("r0", {"entry": "m:f"}, 1.0), c.encode(c.SubmitJob("r0", {"entry": "m:f"}, 1.0)))
        own = await asyncio.gather(batcher.submit(c.SubmitJob("own", {"entry": "m:f"}, 1.0)),
                                   return_exceptions=True)
        assert type(own[0]).__name__ == "RaftUnavailable"
        import gc
        gc.collect()  # (an unread failure of a future is reported when it is collected)
        await asyncio.sleep(0)
        assert "never retrieved" not in caplog.text
    finally:
        await batcher.close()


def test_result_shapes_a_follower_reads_from_an_applied_batch():
    # what SubmitRoute zips with the batch's jobs: one Result per job, in order
    st = ClusterState()
    spec = {"entry": "m:f"}
    res = st.apply(c.SubmitJobs((c.SubmitJob("a", spec, 1.0), c.SubmitJob("a", spec, 1.0),
                                 c.SubmitJob("b", spec, 1.0))))
    assert res.ok and [r.ok for r in res.value] == [True, False, True]
    assert isinstance(res.value[1], Result) and res.value[1].code == "exists"


class _RelayingFollower:
    """The part of a follower's RaftHost SubmitRoute uses: it relays (is_leader False,
    a leader known) and records what it sent and forgot."""

    def __init__(self) -> None:
        from raft import protocol
        self.loop = asyncio.get_running_loop()
        self.apply_hooks: list = []
        self.sent: list[str] = []
        self.forgotten: list[str] = []
        self.level = protocol.PROTOCOL
        relay = self

        class Relay:
            sink = None

            def send(self, key, blob, deadline):
                relay.sent.append(key)

            def forget(self, key):
                relay.forgotten.append(key)
        self.relay = Relay()

    def is_leader(self) -> bool:
        return False

    def protocol(self) -> int:
        return self.level

    def leader(self) -> str:
        return "leader"

    def observe_write(self, command, seconds, ok) -> None:
        pass

    def apply(self, jobs) -> None:
        """An entry holding `jobs` applied here (as the tick thread does)."""
        st = ClusterState()
        cmd = c.SubmitJobs(tuple(jobs))
        res = st.apply(cmd)
        for hook in self.apply_hooks:
            hook(cmd, res)


async def test_a_relayed_caller_gets_its_own_result_or_unavailable_at_its_deadline():
    from jm.cluster.submitroute import SubmitRoute
    from raft.node import RaftUnavailable
    raft = _RelayingFollower()
    route = SubmitRoute(raft, batcher=None, timeout=1.0)  # (long beside a busy machine's pauses)
    loop = asyncio.get_running_loop()
    jobs = [c.SubmitJob(f"j{i}", {"entry": "m:f"}, 1.0) for i in range(5)]

    async def call(job):
        start = loop.time()
        try:
            return await route.submit(job)
        except RaftUnavailable:
            return loop.time() - start  # (how long it waited)
    calls = [asyncio.ensure_future(call(job)) for job in jobs[:2]]
    await asyncio.sleep(0.05)  # (the later callers' deadlines are later)
    calls += [asyncio.ensure_future(call(job)) for job in jobs[2:]]
    await asyncio.sleep(0)
    assert raft.sent == ["j0", "j1", "j2", "j3", "j4"]
    raft.apply([jobs[1], jobs[3]])  # applied here: those two are answered
    calls[2].cancel()  # (its client went away)
    out = await asyncio.gather(*calls, return_exceptions=True)
    assert out[1].value["jobid"] == "j1" and out[3].value["jobid"] == "j3"
    assert isinstance(out[2], asyncio.CancelledError)
    # never applied: unknown outcome, each at its own deadline and not before
    assert out[0] >= 1.0 - 0.01 and out[4] >= 1.0 - 0.01
    assert sorted(raft.forgotten) == ["j0", "j1", "j2", "j3", "j4"]
    assert route._timer is None and not route._deadlines and not route._waiting
    # an answered caller is not kept until its deadline
    later = asyncio.ensure_future(call(c.SubmitJob("j5", {"entry": "m:f"}, 1.0)))
    await asyncio.sleep(0)
    raft.apply([c.SubmitJob("j5", {"entry": "m:f"}, 1.0)])
    assert (await later).ok and not route._deadlines
