"""raft.fsync through real pysyncobj members on loopback: an entry counts toward a majority
only once it is on that member's disk (a follower's answer leaves after its sync, a
leader's commit index moves after its own), a failed sync stops the member for good
(fail-stop), and a member restarted from its files has every acknowledged entry."""
import asyncio
import os

import pytest
from pysyncobj.journal import FileJournal
from pysyncobj.transport import TCPTransport

import raft.journal
from raft.commands import Barrier
from raft.door import journal_of
from raft.journal import DurableJournal
from raft.node import RaftHost, RaftSettings
from tests.helpers import apoll, free_ports


def _hosts(tmp_path, n: int, fsync: bool = True, **settings) -> list:
    ports = free_ports(n)
    addrs = [f"127.0.0.1:{p}" for p in ports]
    names = {a: f"p{i}" for i, a in enumerate(addrs)}
    loop = asyncio.get_running_loop()
    return [RaftHost(a, [b for b in addrs if b != a], str(tmp_path / f"p{i}"),
                     RaftSettings(fsync=fsync, **settings), loop, names) for i, a in enumerate(addrs)]


async def _stop(hosts) -> None:
    for h in hosts:
        await asyncio.to_thread(h.destroy)


@pytest.fixture
def sends(monkeypatch):
    """Every message a member sends, with whether its journal had unsynced changes then,
    and every commit index a member set, with the same."""
    seen: dict = {"sends": [], "commits": []}
    real_send, real_commit = TCPTransport.send, FileJournal.setRaftCommitIndex

    def send(self, node, message):
        journal = journal_of(self._syncObj)
        seen["sends"].append((message.get("type") if isinstance(message, dict) else None,
                              isinstance(journal, DurableJournal) and journal.syncer.dirty))
        return real_send(self, node, message)

    def commit(self, index):
        seen["commits"].append(isinstance(self, DurableJournal) and self.syncer.dirty)
        return real_commit(self, index)
    monkeypatch.setattr(TCPTransport, "send", send)
    monkeypatch.setattr(FileJournal, "setRaftCommitIndex", commit)
    return seen


async def _leader(hosts):
    """The leader, once every one of `hosts` knows the same one among them."""
    names = {h.addr_to_node[h.self_addr] for h in hosts}
    await apoll(lambda: len({h.leader() for h in hosts}) == 1 and hosts[0].leader() in names,
                30, what="one leader (of these members) known to all")
    return next(h for h in hosts if h.leader() == h.addr_to_node[h.self_addr])


async def test_an_entry_counts_only_once_it_is_on_disk(tmp_path, sends):
    hosts = _hosts(tmp_path, 3)
    try:
        leader = await _leader(hosts)
        follower = next(h for h in hosts if h is not leader)
        results = await asyncio.gather(*(h.submit(Barrier(), 10.0)
                                         for h in (leader, follower) for _ in range(40)))
        assert all(r.ok for r in results)
        acks = [dirty for kind, dirty in sends["sends"] if kind == "next_node_idx"]
        assert acks and not any(acks), "a follower answered before its journal was synced"
        others = [kind for kind, dirty in sends["sends"]
                  if dirty and kind not in ("append_entries", "apply_command_response",
                                            "pre_vote", "pre_vote_response")]
        assert not others, others
        assert sends["commits"] and not any(sends["commits"]), \
            "a commit index moved before the member's own journal was synced"
        # a commit needs a majority: the third member may still be writing its copy
        await apoll(lambda: all(h.journal_stats()["entries"] >= 80 for h in hosts), 20,
                    what="every member's journal synced the 80 entries")
        assert all(h.journal_stats()["fsyncs"] > 0 for h in hosts)
    finally:
        await _stop(hosts)


async def test_a_failed_sync_stops_the_member_for_good_and_its_restart_recovers(
        tmp_path, monkeypatch):
    """A follower whose fsync fails once stops (fail-stop): Linux may have dropped the
    pages it could not write and marked them clean, so a later fsync that succeeds proves
    nothing about them (PostgreSQL's fsyncgate). It answers nothing more even once the
    disk works again; the leader's writes commit with the other follower; restarted from
    its files, it catches up."""
    hosts = _hosts(tmp_path, 3)
    try:
        leader = await _leader(hosts)
        sick, other = [h for h in hosts if h is not leader]
        sick_fd = journal_of(sick.syncobj).fd
        real = os.fdatasync
        failing = {"on": True}

        def fdatasync(fd):
            if fd == sick_fd and failing["on"]:
                raise OSError(5, "Input/output error")
            return real(fd)
        monkeypatch.setattr(os, "fdatasync", fdatasync)
        before = sick.applied_index()
        for _ in range(5):
            assert (await leader.submit(Barrier(), 10.0)).ok
        assert other.applied_index() >= leader.applied_index() - 5
        await apoll(sick.failed.is_set, 10, what="the member stopped on the failed sync")
        assert "could not be synced" in sick.failure and "Input/output" in sick.failure
        assert sick.applied_index() <= before + 1
        failing["on"] = False  # the disk works again: the member must not trust it
        for _ in range(5):
            assert (await leader.submit(Barrier(), 10.0)).ok
        assert sick.applied_index() <= before + 1, "a failed journal answered again"
        i = hosts.index(sick)
        await asyncio.to_thread(sick.destroy)
        hosts[i] = sick = RaftHost(sick.self_addr, [h.self_addr for h in hosts if h is not sick],
                                   sick.data_dir, sick.settings, asyncio.get_running_loop(),
                                   sick.addr_to_node)
        await apoll(lambda: sick.applied_index() >= leader.applied_index(), 20,
                    what="the restarted member caught up")
        assert not sick.failed.is_set()
    finally:
        await _stop(hosts)


async def test_a_failed_sync_of_room_written_ahead_stops_the_member_too(tmp_path, monkeypatch):
    """The fdatasync after the journal writes room ahead (zeros, raft/journal.py _reserve)
    also writes out the entries stored in the mapping: its failure is the journal's
    failure, not a full disk to wait out (a later success would prove nothing)."""
    hosts = _hosts(tmp_path, 3)
    try:
        leader = await _leader(hosts)
        sick = next(h for h in hosts if h is not leader)
        journal = journal_of(sick.syncobj)
        sick_fd = journal.fd
        real_zeros, real_sync = raft.journal._write_zeros, os.fdatasync
        armed = {"fail": False, "failed": 0}

        def write_zeros(fd, start, end):
            real_zeros(fd, start, end)
            armed["fail"] = armed["fail"] or fd == sick_fd  # its next fdatasync fails, once

        def fdatasync(fd):
            if fd == sick_fd and armed["fail"]:
                armed["fail"] = False
                armed["failed"] += 1
                raise OSError(5, "Input/output error")
            return real_sync(fd)
        monkeypatch.setattr(raft.journal, "_write_zeros", write_zeros)
        monkeypatch.setattr(os, "fdatasync", fdatasync)
        journal._zeroed = 0  # the next entry writes room ahead
        for _ in range(5):
            assert (await leader.submit(Barrier(), 10.0)).ok
        await apoll(sick.failed.is_set, 10, what="the member stopped on the failed sync")
        assert armed["failed"] == 1
        assert "could not be synced" in sick.failure and "Input/output" in sick.failure
    finally:
        await _stop(hosts)


async def test_without_fsync_the_plain_journal_is_kept(tmp_path, sends):
    hosts = _hosts(tmp_path, 1, fsync=False)
    try:
        await apoll(lambda: hosts[0].leader(), 20, what="a leader")
        assert (await hosts[0].submit(Barrier(), 5.0)).ok
        assert hosts[0].journal_stats() == {}
    finally:
        await _stop(hosts)


async def test_a_restarted_member_has_every_acknowledged_entry(tmp_path):
    """One member (commits with no message sent: the commit index syncs the journal)."""
    hosts = _hosts(tmp_path, 1)
    host = hosts[0]
    try:
        await apoll(lambda: host.leader(), 20, what="a leader")
        for _ in range(25):
            assert (await host.submit(Barrier(), 5.0)).ok
        index = host.applied_index()
        assert host.journal_stats()["fsyncs"] > 0
        meta = os.path.join(tmp_path, "p0", "raft.journal.meta")
        assert os.path.exists(meta) and not os.path.exists(meta + ".tmp")
    finally:
        await _stop(hosts)
    again = RaftHost(host.self_addr, [], str(tmp_path / "p0"), RaftSettings(),
                     asyncio.get_running_loop(), dict(host.addr_to_node))
    try:
        await apoll(lambda: again.leader() and again.applied_index() >= index, 20,
                    what="the journal applied again")
    finally:
        await asyncio.to_thread(again.destroy)
