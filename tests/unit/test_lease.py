"""The peer's lease loop against a scripted Raft: pipelined heartbeats, renewal from the
newest acknowledged send time, re-registration after being declared dead."""
import asyncio
import time

from jm.cluster.members.lease import Lease
from raft.commands import Heartbeat, RegisterPeer
from raft.node import RaftUnavailable
from raft.state import Result
from tests.helpers import apoll

INTERVAL, LEASE = 0.05, 1.0


class ScriptedRaft:
    """Answers each submitted command through a future the test controls."""

    def __init__(self) -> None:
        self.sent: list[tuple[object, asyncio.Future]] = []

    async def submit(self, command, timeout):
        fut = asyncio.get_running_loop().create_future()
        self.sent.append((command, fut))
        return await asyncio.wait_for(fut, timeout)

    def of(self, kind):
        return [(c, f) for c, f in self.sent if isinstance(c, kind)]


class Recorder:
    def __init__(self) -> None:
        self.fenced = True
        self.events: list[str] = []
        self.lease_end = None

    async def fence(self) -> None:
        self.fenced = True
        self.events.append("fence")

    def unfence(self) -> None:
        self.fenced = False
        self.events.append("unfence")

    def set_lease(self, end: float) -> None:
        self.lease_end = end


async def until(pred, timeout=5.0):
    await apoll(pred, timeout, interval=0.005, what="the condition reached")


def make(raft, rec):
    return Lease(raft, "n1", lambda: RegisterPeer("n1", "h", 1, 2, 3, 4, time.time()),
                 lambda now: Heartbeat("n1", now), INTERVAL, LEASE, 5.0, rec, rec)


async def started(raft, lease) -> asyncio.Task:
    """The lease loop running, its first registration acknowledged."""
    task = asyncio.create_task(lease.run())
    await until(lambda: raft.of(RegisterPeer))
    raft.of(RegisterPeer)[0][1].set_result(Result(True))
    await until(lease.registered.is_set)
    return task


async def test_a_stuck_heartbeat_does_not_hold_back_the_next_ones():
    raft, rec = ScriptedRaft(), Recorder()
    lease = make(raft, rec)
    task = await started(raft, lease)
    try:
        assert not rec.fenced and lease.term.valid()
        # the first heartbeat never gets an answer (its leader died with it) ...
        await until(lambda: len(raft.of(Heartbeat)) >= 3)
        first, second = raft.of(Heartbeat)[0], raft.of(Heartbeat)[1]
        assert first[0].time < second[0].time
        # ... while a later one is acknowledged: the lease runs from the later send time
        before = lease.term.lease_from
        second[1].set_result(Result(True))
        await until(lambda: lease.term.lease_from != before)
        assert lease.term.lease_from > before
        # the lease had aged since the registration's send time (jm_lease_age_max_seconds)
        assert 0 < lease.term.age_max <= time.monotonic() - before
        # never more than MAX_IN_FLIGHT unanswered at once
        await asyncio.sleep(INTERVAL * 10)  # let the loop try to send more (a bound, not a wait)
        unanswered = [f for _, f in raft.of(Heartbeat) if not f.done()]
        assert 1 <= len(unanswered) <= 4
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_declared_dead_fences_before_registering_again_and_ignores_old_answers():
    raft, rec = ScriptedRaft(), Recorder()
    lease = make(raft, rec)
    task = await started(raft, lease)
    try:
        await until(lambda: len(raft.of(Heartbeat)) >= 2)
        old = raft.of(Heartbeat)[1]
        raft.of(Heartbeat)[0][1].set_result(Result.fail("stale", "declared dead"))
        await until(lambda: len(raft.of(RegisterPeer)) == 2)
        assert not lease.registered.is_set() and lease.term.lease_from is None
        assert rec.lease_end == 0.0  # the zygote was told to stop everything
        assert rec.events[-1] == "fence"  # fenced before the new registration was sent
        # an answer to a heartbeat of the old incarnation renews nothing
        old[1].set_result(Result(True))
        await asyncio.sleep(0.05)  # give the answer a chance to (wrongly) renew
        assert lease.term.lease_from is None and rec.fenced
        raft.of(RegisterPeer)[1][1].set_result(Result(True))
        await until(lease.registered.is_set)
        assert not rec.fenced and lease.term.valid()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_no_leader_retries_soon_and_the_watchdog_fences_when_the_lease_runs_out():
    raft, rec = ScriptedRaft(), Recorder()
    lease = Lease(raft, "n1", lambda: RegisterPeer("n1", "h", 1, 2, 3, 4, time.time()),
                  lambda now: Heartbeat("n1", now), 10.0, 0.3, 5.0, rec, rec)
    tasks = [asyncio.create_task(lease.run()), asyncio.create_task(lease.watchdog())]
    try:
        await until(lambda: raft.of(RegisterPeer))
        raft.of(RegisterPeer)[0][1].set_result(Result(True))
        await until(lambda: raft.of(Heartbeat))
        # no leader: the next try comes after about 100 ms, not after the 10 s interval
        raft.of(Heartbeat)[0][1].set_exception(RaftUnavailable("no Raft leader"))
        await until(lambda: len(raft.of(Heartbeat)) == 2, timeout=2.0)
        # nothing is acknowledged: the watchdog fences the peer after the 0.3 s lease
        await until(lambda: rec.fenced, timeout=3.0)
        assert not lease.term.valid() and lease.term.expired()
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def test_a_heartbeat_is_urgent_when_renewals_are_late_or_it_tells_a_change():
    raft, rec = ScriptedRaft(), Recorder()
    told = {"ready": True}
    urgency: list[bool] = []

    async def send(hb, timeout, urgent):
        urgency.append(urgent)
        return await raft.submit(hb, timeout)
    lease = Lease(raft, "n1", lambda: RegisterPeer("n1", "h", 1, 2, 3, 4, time.time()),
                  lambda now: Heartbeat("n1", now, told["ready"]), INTERVAL, LEASE, 5.0,
                  rec, rec, send=send)
    task = await started(raft, lease)
    try:
        await until(lambda: len(raft.of(Heartbeat)) >= 1)
        raft.of(Heartbeat)[0][1].set_result(Result(True))  # told: the next are routine
        await until(lambda: len(raft.of(Heartbeat)) >= 2)
        n = len(raft.of(Heartbeat))
        for _, fut in raft.of(Heartbeat)[1:]:
            fut.set_result(Result(True))
        await until(lambda: len(raft.of(Heartbeat)) >= n + 1)
        assert urgency[0] is True and urgency[n] is False  # acknowledged on time
        told["ready"] = False  # a change to tell: urgent at once
        lease.now.set()
        await until(lambda: len(raft.of(Heartbeat)) >= n + 3)
        assert urgency[-1] is True
        # no answers for over 1.5 intervals: late, so urgent whatever it tells
        seen = len(urgency)
        await until(lambda: len(urgency) > seen)
        assert urgency[-1] is True
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
