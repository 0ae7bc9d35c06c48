"""Pre-votes through real pysyncobj members on loopback (raft/prevote.py): a follower
whose election timeout passes while the leader is alive (restarted before the leader
reconnected, or starved of CPU) does not depose it; when the leader is gone a new one
is elected; a leadership transfer still moves leadership at once."""
import asyncio

import pytest

from raft.commands import Barrier
from raft.prevote import grants
from tests.helpers import apoll
from tests.integration.test_raft_journal import _hosts, _leader, _stop


def _term(host) -> int:
    return host.syncobj._SyncObj__raftCurrentTerm


def _name(host) -> str:
    return host.addr_to_node[host.self_addr]


def _state(host) -> dict:
    """What a member's Raft looks like, and where its tick thread is (a failure's text)."""
    import sys
    import threading
    import traceback
    so = host.syncobj
    frames = sys._current_frames()
    stacks = {t.name: "".join(traceback.format_stack(frames[t.ident])[-4:])
              for t in threading.enumerate()
              if t.ident in frames and ("tick" in t.name.lower() or "sync" in t.name.lower())}
    return {"state": so._SyncObj__raftState, "term": _term(host), "leader": host.leader(),
            "connected": so._SyncObj__connectedToAnyone(),
            "transfer": so._SyncObj__transferInProgress, "threads": stacks}


def test_grants_only_without_a_leader_and_to_a_log_as_up_to_date():
    mine = (3, 10)
    assert grants(False, 5.0, 0.4, 3, mine, 4, (3, 10))
    assert grants(False, 5.0, 0.4, 3, mine, 4, (4, 1))  # a later last term wins
    assert not grants(True, 5.0, 0.4, 3, mine, 4, (3, 10))  # the leader itself
    assert not grants(False, 0.1, 0.4, 3, mine, 4, (3, 10))  # a leader heard just now
    assert not grants(False, 5.0, 0.4, 3, mine, 4, (3, 9))  # a shorter log
    assert not grants(False, 5.0, 0.4, 3, mine, 4, (2, 50))  # an older last term
    assert not grants(False, 5.0, 0.4, 5, mine, 4, (3, 10))  # a term already past


@pytest.mark.parametrize("fsync", [True, False])
async def test_a_follower_whose_timeout_passes_does_not_depose_a_live_leader(tmp_path, fsync):
    # the leader must stay live throughout: timeouts a starved test process cannot reach
    # (at the defaults, 2 busy test workers could make a real election, and the follower
    # it elected never ticks a pre-vote again: a leader keeps no election deadline)
    hosts = _hosts(tmp_path, 3, fsync, min_timeout=3.0, max_timeout=6.0,
                   leader_fallback_timeout=6.0, connection_timeout=6.0)
    try:
        leader = await _leader(hosts)
        assert (await leader.submit(Barrier(), 10.0)).ok
        # every member past its first journal writes (a commit needs only a majority; a
        # member's first entry reserves and fsyncs journal blocks on its tick thread, which
        # a disk busy with another test's writes can hold for seconds)
        await apoll(lambda: all(h.applied_index() >= leader.applied_index() for h in hosts),
                    30, what="every member applied the barrier")
        term = _term(leader)
        follower = next(h for h in hosts if h is not leader)
        for _ in range(10):
            # its election timeout passes now (as for a member restarted before the leader
            # reconnected to it): without pre-votes it campaigns at term + 1 and the leader
            # steps down on hearing it
            follower.syncobj._SyncObj__raftElectionDeadline = 0
            try:
                await apoll(lambda: follower.syncobj._SyncObj__raftElectionDeadline > 0, 30,
                            what="the follower's tick")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; the follower: {_state(follower)}") from None
            assert (await leader.submit(Barrier(), 10.0)).ok
        assert [_term(h) for h in hosts] == [term] * 3
        assert {h.leader() for h in hosts} == {_name(leader)}
    finally:
        await _stop(hosts)


async def test_without_the_leader_a_new_one_is_elected_and_a_transfer_moves_it(tmp_path):
    hosts = _hosts(tmp_path, 3, True)
    try:
        leader = await _leader(hosts)
        target = next(h for h in hosts if h is not leader)
        assert await leader.transfer_leadership(target.self_addr)
        await apoll(lambda: target.leader() == _name(target), 30, what="the transfer")
        await asyncio.to_thread(target.destroy)
        rest = [h for h in hosts if h is not target]
        new = await _leader(rest)
        assert new is not target
        assert (await new.submit(Barrier(), 10.0)).ok
        hosts = rest
    finally:
        await _stop(hosts)
