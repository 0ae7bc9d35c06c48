"""Durable acknowledgements under a power cut (Jepsen's LazyFS, in small: chaos/lazyfs.py).

Three real peers, each with its `jobmanager.data-dir` folder (Raft journal, meta, members
file, blobs) on its own lazyfs mount: a write nobody fsynced lives only in lazyfs's
memory. Clients post jobs to every peer and note each job id answered 202. In the middle
of the load, power goes out everywhere at once: every peer and its children get SIGKILL,
every lazyfs drops its unsynced writes. Mount again, start the peers again: every
acknowledged job is there (`raft.fsync: true`). The control case (`raft.fsync: false`)
shows that the fault bites: there, acknowledged jobs are lost.

test_snapshot_survives_power_cut: one member (raft.fsync's durable RaftNode) on a lazyfs, a
cut right after pysyncobj renamed a new snapshot (raft.dump) over the old one, before the
journal's compaction: every acknowledged entry is still there (raft/journal.py fsyncs a
snapshot before the rename, and compacts such a journal at start-up instead of clearing it).
"""
from __future__ import annotations

import contextlib
import mmap
import os
import time
from typing import Any

import pytest
from pysyncobj import SyncObjConf, SyncObjConsumer, replicated

from chaos.lazyfs import BLOCK, LazyMount  # the standard library only (mfusepy: in its process)
from raft.raftnode import new_node
from tests.e2e.powercut import (ACKS_BEFORE_CUT, Load, PowerCluster, _accepted,
                                _fuse_missing)
from tests.helpers import consistent_session, end_session, free_ports, http, poll

pytestmark = [pytest.mark.slow]


def run_power_loss(base: str, fsync: bool) -> tuple[list, set, list]:
    """Load, cut, restart; (acknowledged, job ids in the cluster after, lazyfs cut reports)."""
    if _fuse_missing() is not None:
        pytest.skip(_fuse_missing())
    c = PowerCluster(base, fsync)
    load = Load(c.urls)
    try:
        c.mount()
        c.start()
        c.wait_ready()
        load.start()
        poll(lambda: load.count() >= ACKS_BEFORE_CUT, 45, interval=0.02,
             what=f"{ACKS_BEFORE_CUT} acknowledged submissions")
        dropped = c.power_cut()
        acked = load.finish()
        for m in c.mounts:  # the journal did live on the lazyfs
            assert os.path.exists(os.path.join(m.backing, "raft", "raft.journal")), m.backing

        c.mount()
        c.start()
        c.wait_ready()
        consistent_session(c.urls)  # a fresh session: indexes of this incarnation
        try:
            # a write of this incarnation, then a read at or after its index: everything
            # committed before it (the recovered log) is applied on the reading peer
            body = poll(lambda: _accepted(c.urls[0], "marker"), 30,
                        what="a submission after the restart")
            present = {j["jid"] for j in http("GET", c.urls[0] + "/jobs/overview",
                                              timeout=30)[1]["jobs"]}  # every job
            assert body["jobid"] in present
        finally:
            end_session(c.urls)
        return acked, present, dropped
    finally:
        load.finish()
        c.close()


def test_lazyfs_mmap(tmp_path):
    """The journal's way of writing (stores into a shared mapping): fdatasync brings them
    to the backing file, a cut loses the others; sizes and reads through the mount include
    pending writes; after a remount only synced data is there."""
    if _fuse_missing() is not None:
        pytest.skip(_fuse_missing())
    mnt, back = str(tmp_path / "mnt"), str(tmp_path / "back")
    fs = LazyMount(mnt, back, str(tmp_path / "lazyfs.log"))
    fs.start()
    try:
        with open(os.path.join(mnt, "j"), "wb") as f:
            f.truncate(2 * BLOCK)  # metadata: at once
        with open(os.path.join(mnt, "j"), "r+b") as f:
            mm = mmap.mmap(f.fileno(), 0)
            mm[0:6] = b"synced"
            os.fdatasync(f.fileno())
            mm[BLOCK:BLOCK + 4] = b"lost"
            mm.close()  # the dirty page is written back (at the latest on close): pending
            f.seek(2 * BLOCK)
            f.write(b"appended")  # write(2), no sync: the size grows on the mount only
        backed = open(os.path.join(back, "j"), "rb").read()
        assert backed[:6] == b"synced", "an fdatasync'ed store did not reach the backing file"
        assert backed[BLOCK:BLOCK + 4] == bytes(4), "an unsynced store reached the backing file"
        assert os.path.getsize(os.path.join(mnt, "j")) == 2 * BLOCK + 8 > len(backed)
        assert open(os.path.join(mnt, "j"), "rb").read()[BLOCK:BLOCK + 4] == b"lost"
        assert fs.stats()["pending-bytes"] == 2 * BLOCK
        assert fs.cut()["dropped-bytes"] == 2 * BLOCK
        with pytest.raises(OSError):  # after the cut, writes are refused
            with open(os.path.join(mnt, "k"), "wb"):
                pass
    finally:
        fs.stop()
    assert not os.path.ismount(mnt)
    fs.start()
    try:
        data = open(os.path.join(mnt, "j"), "rb").read()
        assert data[:6] == b"synced" and data[BLOCK:] == bytes(BLOCK), data[BLOCK:BLOCK + 8]
    finally:
        fs.stop()


@pytest.mark.timeout(180)
def test_acknowledged_jobs_survive_power_loss(tmp_path):
    acked, present, dropped = run_power_loss(str(tmp_path), fsync=True)
    lost = [a for a in acked if a[0] not in present]
    assert len(acked) >= ACKS_BEFORE_CUT
    assert not lost, (f"{len(lost)} of {len(acked)} acknowledged submissions lost after a "
                      f"power cut with raft.fsync: true (first: {lost[:5]}); lazyfs: "
                      f"{dropped}; logs and backing dirs in {tmp_path}")


@pytest.mark.timeout(180)
def test_power_loss_bites_without_fsync(tmp_path):
    """The control: the same cut with raft.fsync: false loses acknowledged submissions
    (otherwise the test above could not fail)."""
    acked, present, dropped = run_power_loss(str(tmp_path), fsync=False)
    lost = [a for a in acked if a[0] not in present]
    assert len(acked) >= ACKS_BEFORE_CUT
    assert lost, f"no acknowledged submission lost without fsync; lazyfs: {dropped}"


class _Items(SyncObjConsumer):
    """A replicated list; its `slow` member makes the snapshot's writing take a while."""

    def __init__(self, slow: bool) -> None:
        super().__init__()
        self.items: list[int] = []
        self.slow = _SlowToPickle() if slow else None

    @replicated
    def add(self, x: int) -> None:
        self.items.append(x)


class _SlowToPickle:
    """Pickled (in pysyncobj's forked serializer) in 1 s: a big state, in small. It is
    read back as an empty frozenset: snapshots are read with raft/wire.py's restricted
    unpickler, which knows only what a real state holds."""

    def __reduce__(self) -> tuple:
        time.sleep(1.0)  # the serializer's work, not a wait for state
        return (frozenset, ())


def _member(mnt: str, slow: bool) -> tuple[Any, _Items]:
    """One Raft member (raft.fsync's durable RaftNode) with its files on `mnt`, ticked by
    hand, snapshots only when forced."""
    items = _Items(slow)
    conf = SyncObjConf(journalFile=os.path.join(mnt, "raft.journal"),
                       fullDumpFile=os.path.join(mnt, "raft.dump"), autoTick=False,
                       logCompactionMinEntries=10 ** 9, logCompactionMinTime=10 ** 9)
    addr = f"127.0.0.1:{free_ports(1)[0]}"
    return new_node(addr, [], conf, [items], durable=True), items


def _ticks(obj: Any, cond: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out: {what}"
        obj.doTick(0.01)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("commits_while_writing", [False, True])
def test_snapshot_survives_power_cut(tmp_path, commits_while_writing):
    """A power cut after pysyncobj's serializer renamed a new raft.dump over the old one,
    before the member's next tick (which fsyncs it and compacts the journal): every
    acknowledged entry must still be in the member's state after the restart."""
    if _fuse_missing() is not None:
        pytest.skip(_fuse_missing())
    mnt, back = str(tmp_path / "mnt"), str(tmp_path / "back")
    fs = LazyMount(mnt, back, str(tmp_path / "lazyfs.log"))
    done: list[int] = []
    fs.start()
    try:
        obj, items = _member(mnt, commits_while_writing)
        _ticks(obj, obj._isLeader, "leader")
        for i in range(1, 101):
            items.add(i, callback=lambda r, e: done.append(e))
        _ticks(obj, lambda: len(done) == 100, "100 entries acknowledged")
        obj.forceLogCompaction()  # snapshot 1: made, fsynced, journal compacted
        _ticks(obj, lambda: os.path.exists(os.path.join(back, "raft.dump"))
               and obj.getStatus()["log_len"] < 10, "snapshot 1")
        for i in range(101, 201):
            items.add(i, callback=lambda r, e: done.append(e))
        _ticks(obj, lambda: len(done) == 200, "200 entries acknowledged")
        old = os.stat(os.path.join(back, "raft.dump")).st_ino
        obj.forceLogCompaction()
        obj.doTick(0)  # forks the serializer: raft.dump.tmp, renamed over raft.dump
        if commits_while_writing:  # entries committed while the snapshot is written
            for i in range(201, 211):
                items.add(i, callback=lambda r, e: done.append(e))
            _ticks(obj, lambda: len(done) == 210, "210 entries acknowledged")
        poll(lambda: os.stat(os.path.join(back, "raft.dump")).st_ino != old, 30,
             what="snapshot 2 renamed over snapshot 1")
        fs.cut()  # the power cut, before the member's next tick
        with contextlib.suppress(OSError):
            obj.destroy()
    finally:
        fs.stop()
    fs.start()
    try:
        obj, items = _member(mnt, False)
        try:
            deadline = time.monotonic() + 5  # loads the snapshot, replays the journal
            while len(items.items) < len(done) and time.monotonic() < deadline:
                obj.doTick(0.01)
            status = obj.getStatus()
        finally:
            obj.destroy()
    finally:
        fs.stop()
    assert items.items == list(range(1, len(done) + 1)), (
        f"{len(items.items)} of {len(done)} acknowledged entries after the restart "
        f"(commit index {status['commit_idx']}, applied {status['last_applied']}, "
        f"journal {status['log_len']} entries, backing raft.dump "
        f"{os.path.getsize(os.path.join(back, 'raft.dump'))} bytes)")
