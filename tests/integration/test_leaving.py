"""A stopping leader hands over (raft/leaving.py, RaftHost.hand_off) through real pysyncobj
members on loopback, while the other members keep writing as the peers' lease heartbeats
do: a member takes over at once each time (its log kept as up to date as any: the leader
appends nothing meanwhile), no member goes a lease without an acknowledged write (the
hand-off's gap is measured by bench/handoff.py), and the stopping member never
campaigns, votes or answers a pre-vote again, so it cannot take leadership back nor
stop the others' elections. Five times in a row, the stopped member restarted from its
data each time (issue 46)."""
import asyncio
import time

from pysyncobj.syncobj import _RAFT_STATE

from raft.commands import Barrier
from raft.node import RaftHost, RaftSettings, RaftUnavailable
from tests.helpers import apoll
from tests.integration.test_raft_journal import _hosts, _leader, _stop

ROUNDS = 5
LEASE = 2.0  # s: heartbeat.timeout's default, the lease a peer's heartbeats keep


class Writer:
    """A member's steady writes (a lease heartbeat every 50 ms), as the peers' heartbeats
    are made: a write whose outcome a leader change made unknown is simply made again.
    `gap`: the longest time between two acknowledged writes while `timing`."""

    def __init__(self, host):
        self.host, self.unknown, self.done = host, 0, 0
        self.timing, self.gap = False, 0.0
        self.last = time.monotonic()
        self.task = asyncio.ensure_future(self._run())

    async def _run(self):
        while True:
            try:
                ok = (await self.host.submit(Barrier(), 10.0)).ok
            except RaftUnavailable:
                ok, self.unknown = False, self.unknown + 1
            now = time.monotonic()
            if ok:
                self.done += 1
                if self.timing:
                    self.gap = max(self.gap, now - self.last)
                self.last = now
            await asyncio.sleep(0.05)

    async def stop(self):
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def _restart(old: RaftHost, hosts: list) -> RaftHost:
    """`old` started again on its address and data (a peer's restart)."""
    others = [h.self_addr for h in hosts if h is not old]
    return RaftHost(old.self_addr, others, old.data_dir, RaftSettings(fsync=True),
                    asyncio.get_running_loop(), old.addr_to_node)


async def test_a_stopping_leader_hands_over_at_once_and_stays_out_of_elections(tmp_path):
    hosts = _hosts(tmp_path, 3, True)
    writers: list = []
    try:
        for round_ in range(ROUNDS):
            leader = await _leader(hosts)
            rest = [h for h in hosts if h is not leader]
            await apoll(lambda: all(leader.membership.match_index(h.self_addr) for h in rest), 30,
                        what="the leader knows where each member's log is")
            writers = [Writer(h) for h in rest]
            await apoll(lambda: all(w.done >= 3 for w in writers), 30,
                        what="the followers' writes acknowledged")
            for w in writers:
                w.timing = True
            leader.membership.leave_elections()
            term = leader.term()
            new = await leader.membership.hand_off(10.0)
            assert new is not None and new != leader.addr_to_node[leader.self_addr], new
            assert not leader.is_leader()
            # the others write on through the new leader: nothing was lost in the move
            counts = [w.done for w in writers]
            await apoll(lambda: all(w.done >= c + 5 for w, c in zip(writers, counts)), 30,
                        what="the followers' writes acknowledged by the new leader")
            # no member went a lease (2 s) without an acknowledged heartbeat
            assert all(w.gap < LEASE for w in writers), (round_, [w.gap for w in writers])
            # the stopping member follows, at the new leader's term: it never campaigned
            winner = next(h for h in rest if h.addr_to_node[h.self_addr] == new)
            assert leader.syncobj.getStatus()["state"] == _RAFT_STATE.FOLLOWER
            assert leader.term() == winner.term() > term, (leader.term(), winner.term())
            for w in writers:
                await w.stop()
            writers = []
            await asyncio.to_thread(leader.destroy)
            restarted = _restart(leader, hosts)
            hosts = [restarted if h is leader else h for h in hosts]
            assert (await (await _leader(hosts)).submit(Barrier(), 10.0)).ok
    finally:
        for w in writers:
            await w.stop()
        await _stop(hosts)
