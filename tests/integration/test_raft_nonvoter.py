"""A non-voting member (jm/policy/members/voters.py) through real pysyncobj over TCP: three voters
and two read-only members; the readers apply every entry, learn the leader, send their
writes through it, never count in a quorum (two voters down: nothing commits, though four
of five processes run), and a reader restarted from nothing gets the whole state."""
import asyncio
import collections
import os
import time

import pytest

from raft.commands import Barrier
from raft.door import transport_of
from raft.fanout import READER_PERIOD
from raft.node import RaftHost, RaftSettings, RaftUnavailable
from tests.helpers import apoll, free_ports


def _cluster(tmp_path, voters: int, readers: int, **settings):
    ports = free_ports(voters + readers)
    addrs = [f"127.0.0.1:{p}" for p in ports]
    core = addrs[:voters]
    loop = asyncio.get_running_loop()
    hosts = []
    for i, a in enumerate(addrs):
        voter = i < voters
        hosts.append(RaftHost(a, [b for b in core if b != a], str(tmp_path / f"p{i}"),
                              RaftSettings(**settings), loop, {}, voter=voter))
    return hosts


async def _stop(hosts) -> None:
    for h in hosts:
        await asyncio.to_thread(h.destroy)


async def test_readers_apply_everything_write_through_the_leader_and_never_vote(tmp_path):
    hosts = _cluster(tmp_path, 3, 2)
    voters, readers = hosts[:3], hosts[3:]
    try:
        await apoll(lambda: all(h.leader() in {v.self_addr for v in voters} for h in hosts)
                    and len({h.leader() for h in hosts}) == 1, 30, what="one leader for all")
        leader = next(v for v in voters if v.is_leader())
        assert not any(r.is_leader() or r.membership.voting() for r in readers)
        assert readers[0].membership.members() == sorted(v.self_addr for v in voters)
        # a write from a reader goes through the leader and is applied everywhere
        res = await readers[0].submit(Barrier(), 10)
        assert res.ok
        index = readers[0].applied_index()
        for h in hosts:
            assert await h.wait_applied(index, 10), h.self_addr
        # the readers hold no journal and listen on no Raft port
        assert not os.path.exists(tmp_path / "p3" / "raft.journal")
        await apoll(lambda: leader.membership.readonly_connected() == 2, 10,
                    what="both readers seen")
        # two voters down: four of five processes run, but the readers do not vote
        others = [v for v in voters if v is not leader]
        for v in others:
            await asyncio.to_thread(v.destroy)
        hosts = [leader, *readers]
        with pytest.raises(RaftUnavailable):
            await readers[1].submit(Barrier(), 3)
    finally:
        await _stop(hosts)


async def test_a_reader_started_from_nothing_gets_the_state(tmp_path):
    hosts = _cluster(tmp_path, 1, 0)
    try:
        await apoll(lambda: hosts[0].is_leader(), 20, what="the single voter leads")
        for _ in range(5):
            assert (await hosts[0].submit(Barrier(), 5)).ok
        index = hosts[0].applied_index()
        reader = RaftHost(f"127.0.0.1:{free_ports(1)[0]}", [hosts[0].self_addr],
                          str(tmp_path / "r"), RaftSettings(), asyncio.get_running_loop(),
                          {}, voter=False)
        hosts.append(reader)
        assert await reader.wait_applied(index, 20)
        assert reader.leader() == hosts[0].self_addr
    finally:
        await _stop(hosts)


async def test_a_reader_promoted_in_place_hands_over_without_going_back(tmp_path):
    """Two voters, one reader that applies a steady stream of writes; it starts its voting
    node, the leader adds it, and it takes over: its applied index never goes back, every
    entry is notified once, and it votes: with the other voter gone, 2 of 3 commit."""
    hosts = _cluster(tmp_path, 2, 1)
    voters, reader = hosts[:2], hosts[2]
    seen: list = []
    # each apply notification with the index it made: one per entry, none twice or lost
    reader.apply_hooks.append(lambda cmd, res: seen.append(reader.consumer.state.applied))
    try:
        await apoll(lambda: reader.leader() is not None and voters[0].leader() is not None,
                    30, what="a leader known to the reader")
        leader = next(v for v in voters if v.is_leader())
        stop = asyncio.Event()

        async def writes():
            n = 0
            while not stop.is_set():
                try:
                    await leader.submit(Barrier(), 5)
                    n += 1
                except RaftUnavailable:
                    await asyncio.sleep(0.05)
            return n
        writer = asyncio.create_task(writes())
        indices = []

        async def watch():
            while not stop.is_set():
                indices.append(reader.applied_index())
                await asyncio.sleep(0.005)
        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0.3)  # (let writes flow: the hand-over happens amid them)
        reader.promotion.begin_voting([v.self_addr for v in voters])
        assert reader.is_voter is False
        await leader.membership.change_member(True, reader.self_addr, 10)
        await apoll(lambda: reader.is_voter, 30, what="the reader took over as a voter")
        await asyncio.sleep(0.3)
        stop.set()
        written = await writer
        await watcher
        assert written > 10
        assert indices == sorted(indices), "the applied index went backwards"
        index = leader.applied_index()
        assert await reader.wait_applied(index, 10)
        assert seen == list(range(seen[0], seen[0] + len(seen))) and seen[-1] == index
        assert await apoll(lambda: reader.membership.voting(), 10, what="voting")
        assert os.path.exists(tmp_path / "p2" / "raft.journal")
        # it counts in the quorum now: the other voter (not the leader) gone, 2 of 3 commit
        other = next(v for v in voters if v is not leader)
        await asyncio.to_thread(other.destroy)
        hosts = [leader, reader]
        assert (await reader.submit(Barrier(), 10)).ok
    finally:
        await _stop(hosts)


async def test_the_leader_sends_quiet_readers_the_log_once_a_period(tmp_path):
    """raft/fanout.py: while the leader commits a stream of writes, the voters get every
    entry as it is appended, a quiet reader gets the log at most once per READER_PERIOD, in
    batches, and a reader's own writes still come back applied on it."""
    hosts = _cluster(tmp_path, 3, 2)
    voters, readers = hosts[:3], hosts[3:]
    try:
        await apoll(lambda: all(h.leader() is not None for h in hosts)
                    and leader_of(voters) is not None, 30, what="a leader known to all")
        leader = leader_of(voters)
        await apoll(lambda: leader.membership.readonly_connected() == 2, 10,
                    what="both readers seen")
        transport = transport_of(leader.syncobj)
        original, sent = transport.send, collections.Counter()

        def counting(node, message):  # messages carrying entries, per member
            if isinstance(message, dict) and message.get("entries"):
                sent[getattr(node, "address", None) or id(node)] += 1
            return original(node, message)
        transport.send = counting
        t0 = time.monotonic()
        for i in range(100):
            writer = readers[0] if i % 10 == 0 else leader
            assert (await writer.submit(Barrier(), 10)).ok  # applied on the writer
        elapsed = time.monotonic() - t0
        transport.send = original
        index = leader.applied_index()
        for h in hosts:
            assert await h.wait_applied(index, 10), h.self_addr
        period = max(READER_PERIOD, RaftSettings().append_entries_period)
        followers = [v.self_addr for v in voters if v is not leader]
        assert all(sent[a] >= 100 for a in followers), sent
        quiet = [n for n in sent if n not in followers]
        assert len(quiet) == 2, sent  # both readers got something
        assert min(sent[n] for n in quiet) <= elapsed / period + 5, (sent, elapsed)
    finally:
        await _stop(hosts)


def leader_of(voters):
    return next((v for v in voters if v.is_leader()), None)


async def test_snapshots_are_timed_and_load(tmp_path):
    """raft/snapshots.py: a member's log compaction (a forked child writes the snapshot)
    is counted and timed, on a voter (raft.dump) and a reader (raft.reader-dump); the
    snapshots hold none of the node's own attributes (raft/door.py replicate_only_code_version: a
    timer in them made every snapshot unloadable) and load."""
    hosts = _cluster(tmp_path, 1, 1, log_compaction_min_entries=40)
    voter, reader = hosts
    try:
        await apoll(lambda: voter.is_leader() and reader.leader() is not None, 20,
                    what="a leader known to the reader")
        assert voter.snapshot_stats().taken == 0
        for _ in range(60):  # (written through the reader: it gets every entry at once, so
            # the leader's compaction never leaves it behind: it would get the snapshot)
            assert (await reader.submit(Barrier(), 10)).ok
        assert await reader.wait_applied(voter.applied_index(), 10)
        for host, dump in ((voter, "p0/raft.dump"), (reader, "p1/raft.reader-dump")):
            await apoll(lambda h=host: h.snapshot_stats().taken >= 1, 20,
                        what=f"a snapshot on {dump}")
            stats = host.snapshot_stats()
            assert stats.failed == 0
            assert 0 < stats.start_seconds <= stats.seconds < 20, stats
            assert os.path.getsize(tmp_path / dump) > 0
        # the snapshots load: a reader started from nothing gets the leader's (its log
        # begins after it), and the voter restarted starts from its own
        index = voter.applied_index()
        late = RaftHost(f"127.0.0.1:{free_ports(1)[0]}", [voter.self_addr],
                        str(tmp_path / "late"), RaftSettings(), asyncio.get_running_loop(),
                        {}, voter=False)
        hosts.append(late)
        assert await late.wait_applied(index, 20)
        await asyncio.to_thread(voter.destroy)
        hosts.remove(voter)
        again = RaftHost(voter.self_addr, [], str(tmp_path / "p0"),
                         RaftSettings(log_compaction_min_entries=40),
                         asyncio.get_running_loop(), {}, voter=True)
        hosts.append(again)
        assert await again.wait_applied(index, 20)
        await apoll(lambda: again.is_leader(), 20, what="the restarted voter leads")
    finally:
        await _stop(hosts)
