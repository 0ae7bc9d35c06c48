"""Batcher's `in_flight`: up to that many batches wait for their commit at once, each
caller still gets its own Result, and a batch is taken only when a slot is free (so it
gathers what came meanwhile). The Raft here is a stand-in whose commits finish when the
test says: what is checked is the Batcher's own bookkeeping."""
import asyncio

from jm.cluster.batcher import Batcher
from raft import commands as c
from raft.state import ClusterState


class GatedRaft:
    """Commits applied to a real ClusterState, each finishing when its gate is opened."""

    def __init__(self) -> None:
        self.st = ClusterState()
        self.gates: list[asyncio.Event] = []
        self.batches: list[int] = []

    async def submit(self, command, timeout):
        gate = asyncio.Event()
        self.gates.append(gate)
        self.batches.append(len(command.jobs))
        await gate.wait()
        return self.st.apply(command)

    def protocol(self):
        return self.st.protocol


async def until(fn, what: str) -> None:
    for _ in range(1000):
        if fn():
            return
        await asyncio.sleep(0)   # (the loop's other tasks run: no wall time passes)
    raise AssertionError(f"never: {what}")


def submit(b: Batcher, name: str):
    return asyncio.ensure_future(b.submit(c.SubmitJob(name, {}, 1.0)))


def test_batches_commit_in_flight_up_to_the_limit_and_each_caller_gets_its_result():
    async def go():
        raft = GatedRaft()
        b = Batcher(raft, c.SubmitJobs, 5.0, retry=False, in_flight=2)
        b.start()
        try:
            first = [submit(b, f"a{i}") for i in range(3)]
            await until(lambda: len(raft.gates) == 1, "the first batch sent")
            second = [submit(b, f"b{i}") for i in range(2)]
            await until(lambda: len(raft.gates) == 2, "a second batch sent before the first")
            third = [submit(b, f"c{i}") for i in range(4)]
            for _ in range(50):
                await asyncio.sleep(0)
            assert len(raft.gates) == 2      # both slots taken: the third waits, gathering
            fourth = submit(b, "d0")
            raft.gates[1].set()              # the second commits first: its callers answered
            out = await asyncio.gather(*second)
            assert all(r.ok for r in out) and not any(f.done() for f in first)
            await until(lambda: len(raft.gates) == 3, "the freed slot sends the next batch")
            assert raft.batches == [3, 2, 5]  # (everything that came while it waited)
            raft.gates[0].set()
            raft.gates[2].set()
            out = await asyncio.gather(*first, *third, fourth)
        finally:
            await b.close()
        return raft, out
    raft, out = asyncio.run(go())
    assert all(r.ok for r in out) and len(raft.st.jobs) == 10


def test_one_in_flight_sends_the_next_batch_only_after_the_commit():
    async def go():
        raft = GatedRaft()
        b = Batcher(raft, c.SubmitJobs, 5.0, retry=False)
        b.start()
        try:
            first = submit(b, "a")
            await until(lambda: len(raft.gates) == 1, "the first batch sent")
            rest = [submit(b, f"b{i}") for i in range(3)]
            for _ in range(50):
                await asyncio.sleep(0)
            assert len(raft.gates) == 1
            raft.gates[0].set()
            await until(lambda: len(raft.gates) == 2, "the next batch after the commit")
            raft.gates[1].set()
            out = await asyncio.gather(first, *rest)
        finally:
            await b.close()
        return raft, out
    raft, out = asyncio.run(go())
    assert all(r.ok for r in out) and raft.batches == [1, 3]
