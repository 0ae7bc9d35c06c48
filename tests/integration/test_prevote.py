"""Pre-votes through real pysyncobj members on loopback (raft/prevote.py): a follower
whose election timeout passes while the leader is alive (restarted before the leader
reconnected, or starved of CPU) does not depose it; when the leader is gone a new one
is elected; a leadership transfer still moves leadership at once."""
import asyncio
import threading

import pytest
from pysyncobj.syncobj import _RAFT_STATE

from raft.commands import Barrier
from raft.door import NodeView, journal_of
from raft.prevote import grants
from tests.helpers import apoll
from tests.integration.test_raft_journal import _hosts, _leader, _stop


def _term(host) -> int:
    return NodeView(host.syncobj).term


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
    view = NodeView(so)
    return {"state": so.getStatus()["state"], "term": _term(host), "leader": host.leader(),
            "connected": view.connected_to_anyone(),
            "transfer": view.transferring, "threads": stacks}


def _slow_hosts(tmp_path, fsync: bool) -> list:
    """3 members whose leader stays live throughout: timeouts a starved test process
    cannot reach (at the defaults, 2 busy test workers could make a real election, and
    the follower it elected never ticks a pre-vote again: a leader keeps no deadline)."""
    return _hosts(tmp_path, 3, fsync, min_timeout=3.0, max_timeout=6.0,
                  leader_fallback_timeout=6.0, connection_timeout=6.0)


async def _settled(hosts):
    """The leader, once every member is past its first journal writes (a commit needs
    only a majority; a member's first entry reserves and fsyncs journal blocks on its
    tick thread, which a disk busy with another test's writes can hold for seconds)."""
    leader = await _leader(hosts)
    assert (await leader.submit(Barrier(), 10.0)).ok
    await apoll(lambda: all(h.applied_index() >= leader.applied_index() for h in hosts),
                30, what="every member applied the barrier")
    return leader


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
    hosts = _slow_hosts(tmp_path, fsync)
    try:
        leader = await _settled(hosts)
        term = _term(leader)
        follower = next(h for h in hosts if h is not leader)
        so, armed = follower.syncobj, threading.Event()

        def expire():
            # its election timeout passes now (as for a member restarted before the leader
            # reconnected to it): without pre-votes it campaigns at term + 1 and the leader
            # steps down on hearing it. Set on its tick thread, between ticks (a write from
            # this thread could land in the middle of a tick, past the pre-vote's look)
            if armed.is_set():
                NodeView(so).election_deadline = 0
                armed.clear()
        so.addOnTickCallback(expire)
        for _ in range(10):
            armed.set()
            try:  # (0 until its next tick asks for pre-votes or hears the leader)
                await apoll(lambda: not armed.is_set()
                            and NodeView(so).election_deadline > 0, 30,
                            what="the follower's tick")
            except AssertionError as exc:
                raise AssertionError(f"{exc}; the follower: {_state(follower)}") from None
            assert (await leader.submit(Barrier(), 10.0)).ok
        so.removeOnTickCallback(expire)
        assert [_term(h) for h in hosts] == [term] * 3
        assert {h.leader() for h in hosts} == {_name(leader)}
    finally:
        await _stop(hosts)


async def test_without_the_leader_a_new_one_is_elected_and_a_transfer_moves_it(tmp_path):
    hosts = _hosts(tmp_path, 3, True)
    try:
        leader = await _leader(hosts)
        target = next(h for h in hosts if h is not leader)
        # pysyncobj refuses a transfer to a member the leader does not know to have its
        # whole log yet (right after the election, its first entry may be on its way)
        await apoll(lambda: leader.membership.transfer_leadership(target.self_addr), 30,
                    what="the leader to accept the transfer")
        await apoll(lambda: target.leader() == _name(target), 30, what="the transfer")
        await asyncio.to_thread(target.destroy)
        rest = [h for h in hosts if h is not target]
        new = await _leader(rest)
        assert new is not target
        assert (await new.submit(Barrier(), 10.0)).ok
        hosts = rest
    finally:
        await _stop(hosts)


async def test_a_follower_held_past_its_timeout_within_a_tick_does_not_campaign(tmp_path):
    """pysyncobj writes the term and commit index once a second in its tick, and looks at
    the election timeout after that write: a write held by the disk (full, then room
    again) until the timeout has passed must not start an election without a pre-vote
    (the follower would raise its term, and the leader step down, or never hear it)."""
    hosts = _slow_hosts(tmp_path, True)
    try:
        leader = await _settled(hosts)
        term = _term(leader)
        follower = next(h for h in hosts if h is not leader)
        journal = journal_of(follower.syncobj)
        real, held = journal.onOneSecondTimer, {"done": False}
        release = threading.Event()

        def one_second_timer():  # the disk holds the write past the longest timeout
            journal.onOneSecondTimer = real
            release.wait(6.5)
            held["done"] = True
            real()
        journal.onOneSecondTimer = one_second_timer
        await apoll(lambda: held["done"], 30, what="the follower's held tick")
        for _ in range(3):
            assert (await leader.submit(Barrier(), 10.0)).ok
        await apoll(lambda: follower.applied_index() >= leader.applied_index(), 30,
                    what="the follower applied the leader's entries")
        assert [_term(h) for h in hosts] == [term] * 3, _state(follower)
        assert {h.leader() for h in hosts} == {_name(leader)}
    finally:
        await _stop(hosts)


async def test_a_member_whose_term_went_past_the_leader_unheard_gets_back_in(tmp_path):
    """A member raised its term and its vote requests were lost (its connections were
    down when its disk let it go): the leader's entries are of an older term, which
    pysyncobj ignores, and pre-votes are refused while that leader is heard. The member
    tells the leader its term; a leader is elected at a newer term and all follow it."""
    hosts = _hosts(tmp_path, 3, True)
    try:
        leader = await _leader(hosts)
        assert (await leader.submit(Barrier(), 10.0)).ok
        term = _term(leader)
        member = next(h for h in hosts if h is not leader)
        so = member.syncobj
        done = threading.Event()

        def ahead():  # on its tick thread: a campaign whose vote requests were all lost
            if done.is_set():
                return
            so._SyncObj__setCurrentTerm(term + 2, so._SyncObj__selfNode.id)
            so._SyncObj__setState(_RAFT_STATE.CANDIDATE)
            so._SyncObj__raftLeader = None
            done.set()
        so.addOnTickCallback(ahead)
        await apoll(done.is_set, 30, what="the member's term raised")
        so.removeOnTickCallback(ahead)
        await apoll(lambda: len({h.leader() for h in hosts}) == 1 and hosts[0].leader()
                    and all(_term(h) >= term + 2 for h in hosts), 30,
                    what="one leader at a term past the member's, known to all")
        new = next(h for h in hosts if h.leader() == _name(h))
        assert (await new.submit(Barrier(), 10.0)).ok
        await apoll(lambda: member.applied_index() >= new.applied_index(), 30,
                    what="the member applied the new leader's entry")
    finally:
        await _stop(hosts)
