"""Durable acknowledgements under a power cut (Jepsen's LazyFS, in small: chaos/lazyfs.py).

Three real peers, each with its `jobmanager.data-dir` folder (Raft journal, meta, members
file, blobs) on its own lazyfs mount: a write nobody fsynced lives only in lazyfs's
memory. Clients post jobs to every peer and note each job id answered 202. In the middle
of the load, power goes out everywhere at once: every peer and its children get SIGKILL,
every lazyfs drops its unsynced writes. Mount again, start the peers again: every
acknowledged job is there (`raft.fsync: true`). The control case (`raft.fsync: false`)
shows that the fault bites: there, acknowledged jobs are lost.

test_snapshot_survives_power_cut: one member (raft.fsync's DurableSyncObj) on a lazyfs, a
cut right after pysyncobj renamed a new snapshot (raft.dump) over the old one, before the
journal's compaction: every acknowledged entry is still there (raft/journal.py fsyncs a
snapshot before the rename, and compacts such a journal at start-up instead of clearing it).
"""
from __future__ import annotations

import contextlib
import ctypes.util
import json
import mmap
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Optional

import psutil
import pytest
from pysyncobj import SyncObjConf, SyncObjConsumer, replicated

from chaos.lazyfs import BLOCK, LazyMount  # the standard library only (mfusepy: in its process)
from raft.journal import durable_syncobj
from tests.helpers import (consistent_session, end_session, free_ports, http, make_conf,
                           poll)

pytestmark = [pytest.mark.slow]

FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "integration") + "/"
# jobs that need no Spark: one runs per peer (jobmanager.slots: 1) until stopped, the
# others wait in CREATED; either way they are in the replicated state
SPEC = {"entry": "jobs_fixture:wait_for_stop", "pyfiles": [FIX],
        "restart-strategy": {"type": "none"}}
CLIENTS_PER_PEER = 2
ACKS_BEFORE_CUT = 150   # the cut comes once this many submissions were acknowledged
# each fsync takes this long on the lazyfs (a slow disk): at the cut, writes are on their
# way to the disk (pending in lazyfs, or dirty pages of the journal's mapping) and are lost
SYNC_DELAY = 0.02


def _fuse_missing() -> Optional[str]:
    """Why a lazyfs cannot be mounted here, or None."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse is missing"
    if ctypes.util.find_library("fuse3") is None:
        return "libfuse3 (libfuse3.so.3) is not installed"
    if shutil.which("fusermount3") is None:
        return "fusermount3 (Debian's fuse3) is not installed"
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as exc:
        return f"mfusepy cannot be loaded: {exc}"
    return None


def post_job(url: str, name: str, timeout: float = 5.0) -> tuple[int, Any]:
    """POST /jobs without the shared session (the load must not wait for indexes)."""
    req = urllib.request.Request(url + "/jobs", data=json.dumps(dict(SPEC, name=name)).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _accepted(url: str, name: str) -> Optional[dict]:
    """POST /jobs through the shared session (notes the answer's X-JM-Index): the answer
    if 202, else None."""
    status, body = http("POST", url + "/jobs", dict(SPEC, name=name))
    return body if status == 202 else None


class PowerCluster:
    """3 peer processes, each in its own session, each with its data folder on a lazyfs."""

    def __init__(self, base: str, fsync: bool) -> None:
        self.base = base
        self.conf_dir, self.lines = make_conf(base, 3, {
            "jobmanager.executor.preload": "none", "jobmanager.slots": 1,
            "raft.fsync": fsync})
        self.urls = ["http://127.0.0.1:" + line.split(":")[1] for line in self.lines]
        self.log_dir = os.path.join(base, "log")
        os.makedirs(self.log_dir, exist_ok=True)
        # jm/cluster/peer.py: the peer's data folder is <data-dir>/<host>_<raft-port>
        self.mounts = [LazyMount(os.path.join(base, "data", host + "_" + raft),
                                 os.path.join(base, "backing", str(i)),
                                 os.path.join(self.log_dir, f"lazyfs-{i}.log"), SYNC_DELAY)
                       for i, (host, _, raft) in enumerate(l.split(":") for l in self.lines)]
        self.procs: list[subprocess.Popen] = []

    def mount(self) -> None:
        for m in self.mounts:
            m.start()

    def start(self) -> None:
        self.procs = []
        for i, line in enumerate(self.lines):
            with open(os.path.join(self.log_dir, f"peer-{i}.log"), "ab") as log:
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-m", "jm.cluster.peer", "--conf-dir", self.conf_dir,
                     "--peer", line], stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                    start_new_session=True))

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Every peer healthy (a leader, registered), then a submission goes through."""
        for url in self.urls:
            poll(lambda u=url: http("GET", u + "/healthz", timeout=2)[1].get("ok"), timeout,
                 interval=0.1, what=f"{url} healthy")

    def kill_peers(self) -> list[int]:
        """SIGKILL to every peer, its process group and every descendant (zygote, job
        processes in groups of their own), as fast as possible: the power goes out."""
        victims: list[int] = []
        for p in self.procs:
            try:
                victims += [c.pid for c in psutil.Process(p.pid).children(recursive=True)]
            except psutil.NoSuchProcess:
                pass
            victims.append(p.pid)
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the peer's session (its own group)
            except ProcessLookupError:
                pass
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return victims

    def wait_gone(self, pids: list[int], timeout: float = 30.0) -> None:
        for p in self.procs:
            p.wait(timeout)  # reaps the peers (our children)

        def alive() -> list[int]:
            out = []
            for pid in pids:
                try:
                    if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                        out.append(pid)
                except psutil.NoSuchProcess:
                    pass
            return out
        poll(lambda: not alive(), timeout, what=f"processes {alive()} gone")

    def power_cut(self) -> list[dict]:
        """Kill everything, drop every unsynced write, unmount. Each lazyfs's report: what
        the cut dropped, and what the kernel wrote back after it (the killed processes'
        dirty pages), refused."""
        pids = self.kill_peers()
        for m in self.mounts:
            m.cut()
        self.wait_gone(pids)
        reports = [m.stats() for m in self.mounts]
        for m in self.mounts:
            m.stop()
        return reports

    def close(self) -> None:
        """Never leave a peer, a job process or a mount behind."""
        try:
            self.wait_gone(self.kill_peers())
        finally:
            for m in self.mounts:
                m.stop()


class Load:
    """Clients posting jobs to every peer; every job id answered 202 is noted."""

    def __init__(self, urls: list[str]) -> None:
        self.urls = urls
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked: list[tuple[str, int, float]] = []   # (job id, peer, monotonic time)
        self.errors = 0
        self.threads = [threading.Thread(target=self._client, args=(k,), daemon=True)
                        for k in range(CLIENTS_PER_PEER * len(urls))]

    def _client(self, k: int) -> None:
        peer, i = k % len(self.urls), 0
        while not self.stop.is_set():
            i += 1
            try:
                status, body = post_job(self.urls[peer], f"c{k}-{i}", timeout=3.0)
            except OSError:  # refused or reset: the peer is down (the cut), or busy
                status, body = 0, None
            if status == 202:
                with self.lock:
                    self.acked.append((body["jobid"], peer, time.monotonic()))
            else:
                with self.lock:
                    self.errors += 1
                self.stop.wait(0.05)  # pacing after a refusal (no leader, peer down)

    def count(self) -> int:
        with self.lock:
            return len(self.acked)

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def finish(self) -> list[tuple[str, int, float]]:
        self.stop.set()
        for t in self.threads:
            t.join(10)
        with self.lock:
            return list(self.acked)


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
    """One Raft member (raft.fsync's DurableSyncObj) with its files on `mnt`, ticked by
    hand, snapshots only when forced."""
    items = _Items(slow)
    conf = SyncObjConf(journalFile=os.path.join(mnt, "raft.journal"),
                       fullDumpFile=os.path.join(mnt, "raft.dump"), autoTick=False,
                       logCompactionMinEntries=10 ** 9, logCompactionMinTime=10 ** 9)
    addr = f"127.0.0.1:{free_ports(1)[0]}"
    return durable_syncobj(addr, [], conf, [items], conf.fullDumpFile), items


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
