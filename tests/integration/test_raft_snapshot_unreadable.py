"""A member whose snapshot exists but cannot be read stops (fail-stop) instead of doing
what pysyncobj does: log it and go on from an empty state, replaying the journal's
entries after the snapshot onto it (a replica unlike any other, answering reads). A real
durable RaftNode (raft.fsync) on a temporary dir, ticked by hand."""
import os
import time

from pysyncobj import SyncObjConf, SyncObjConsumer, replicated

from raft.door import journal_of
from raft.journal import DurableJournal
from raft.raftnode import new_node
from tests.helpers import free_ports


class _Items(SyncObjConsumer):
    def __init__(self) -> None:
        super().__init__()
        self.items: list[int] = []

    @replicated
    def add(self, x: int) -> None:
        self.items.append(x)


def _member(d: str):
    items = _Items()
    conf = SyncObjConf(journalFile=os.path.join(d, "raft.journal"),
                       fullDumpFile=os.path.join(d, "raft.dump"), autoTick=False,
                       logCompactionMinEntries=10 ** 9, logCompactionMinTime=10 ** 9)
    return new_node(f"127.0.0.1:{free_ports(1)[0]}", [], conf, [items], durable=True), items


def _ticks(obj, cond, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out: {what}"
        obj.doTick(0.01)


def test_a_member_with_an_unreadable_snapshot_stops_instead_of_starting_empty(tmp_path):
    d = str(tmp_path)
    obj, items = _member(d)
    try:
        _ticks(obj, obj._isLeader, "leader")
        done = []
        for i in range(1, 51):
            items.add(i, callback=lambda r, e: done.append(e))
        _ticks(obj, lambda: len(done) == 50, "50 entries")
        obj.forceLogCompaction()
        _ticks(obj, lambda: os.path.exists(os.path.join(d, "raft.dump"))
               and obj.getStatus()["log_len"] < 10, "a snapshot")
        for i in range(51, 61):  # and entries after it, in the journal only
            items.add(i, callback=lambda r, e: done.append(e))
        _ticks(obj, lambda: len(done) == 60, "60 entries")
    finally:
        obj.destroy()
    dump = os.path.join(d, "raft.dump")
    with open(dump, "r+b") as f:  # a damaged snapshot: its second half gone
        f.truncate(os.path.getsize(dump) // 2)

    obj, items = _member(d)
    try:
        journal = journal_of(obj)
        assert isinstance(journal, DurableJournal)
        _ticks(obj, lambda: journal.syncer.failed is not None, "the member to fail")
        assert "the Raft snapshot" in journal.syncer.failed and "cannot be read" in journal.syncer.failed
        assert dump in journal.syncer.failed and "Raft dir" in journal.syncer.failed
        for _ in range(50):  # it does nothing more: nothing applied, no leadership
            obj.doTick(0.01)
        assert items.items == [] and not obj._isLeader()
    finally:
        obj.destroy()
