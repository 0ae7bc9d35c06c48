"""Peers on power-loss filesystems (chaos/lazyfs.py) for the e2e tests of durable
acknowledgements: tests/e2e/test_power_loss.py, tests/e2e/test_fsync_failure.py."""
from __future__ import annotations

import ctypes.util
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Optional

import psutil

from chaos.lazyfs import LazyMount  # the standard library only (mfusepy: in its process)
from chaos.peers import PeerProcesses, request, running, send
from tests.helpers import http, make_conf, poll

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
    return request("POST", url + "/jobs", dict(SPEC, name=name), timeout=timeout)[:2]


def _accepted(url: str, name: str) -> Optional[dict]:
    """POST /jobs through the shared session (notes the answer's X-JM-Index): the answer
    if 202, else None."""
    status, body = http("POST", url + "/jobs", dict(SPEC, name=name))
    return body if status == 202 else None


class PowerCluster(PeerProcesses):
    """3 peer processes, each in its own session, each with its data folder on a lazyfs:
    the shared process harness (chaos/peers.py), its peers started as children here."""

    def __init__(self, base: str, fsync: bool, sync_delay: float = SYNC_DELAY) -> None:
        conf_dir, lines = make_conf(base, 3, {
            "jobmanager.executor.preload": "none", "jobmanager.slots": 1,
            "raft.fsync": fsync})
        super().__init__(base, lines, conf_dir)
        self.log_dir = os.path.join(base, "log")
        os.makedirs(self.log_dir, exist_ok=True)
        # jm/peer/peer.py: the peer's data folder is <data-dir>/<host>_<raft-port>
        self.mounts = [LazyMount(os.path.join(base, "data", host + "_" + raft),
                                 os.path.join(base, "backing", str(i)),
                                 os.path.join(self.log_dir, f"lazyfs-{i}.log"), sync_delay)
                       for i, (host, _, raft) in enumerate(l.split(":") for l in self.lines)]
        self.procs: list[Optional[subprocess.Popen]] = []

    def call(self, method, url, body=None, timeout=10.0):
        return http(method, url, body, timeout=timeout)

    def wait(self, fn, timeout, what, interval=0.1):
        return poll(fn, timeout, interval, what)

    def mount(self) -> None:
        for m in self.mounts:
            m.start()

    def start(self, only: Optional[list[int]] = None) -> None:
        """Start every peer (or those of `only`), each in a session of its own."""
        if len(self.procs) != len(self.lines):
            self.procs = [None] * len(self.lines)
        for i, line in enumerate(self.lines):
            if only is not None and i not in only:
                continue
            with open(os.path.join(self.log_dir, f"peer-{i}.log"), "ab") as log:
                self.procs[i] = subprocess.Popen(
                    [sys.executable, "-m", "jm.peer", "--conf-dir", self.conf_dir,
                     "--peer", line], stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                    start_new_session=True)
            self.live[i] = self.procs[i].pid
            self.all_pids.add(self.procs[i].pid)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Every peer healthy (a leader, registered), then a submission goes through."""
        for i in range(len(self.urls)):
            self.wait_healthy(i, timeout, interval=0.1, call_timeout=2)

    def kill_peers(self) -> list[int]:
        """SIGKILL to every peer, its process group and every descendant (zygote, job
        processes in groups of their own), as fast as possible: the power goes out."""
        victims: list[int] = []
        procs = [p for p in self.procs if p is not None]
        for p in procs:
            try:
                victims += [c.pid for c in psutil.Process(p.pid).children(recursive=True)]
            except psutil.NoSuchProcess:
                pass
            victims.append(p.pid)
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # the peer's session (its own group)
            except ProcessLookupError:
                pass
        send(victims, signal.SIGKILL)
        self.live.clear()
        return victims

    def wait_gone(self, pids: list[int], timeout: float = 30.0) -> None:
        for p in self.procs:
            if p is not None:
                p.wait(timeout)  # reaps the peers (our children)

        def alive() -> list[int]:
            return [pid for pid in pids if running(pid)]
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
