"""Stopping a peer cannot hang: every step has a deadline, and the processes the peer
started are gone afterwards whatever got stuck (real peers, zygote and job processes)."""
import asyncio
import os
import signal
import time

from tests.conftest import InProcessCluster
from tests.helpers import ahttp, apoll

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


async def _running_job(c, peer_index: int) -> int:
    """Submit a long job, wait until it runs; the pid of its job process."""
    s, b = await ahttp("POST", c.url(0) + "/jobs", {"entry": "jobs_fixture:sleepy",
                                                    "pyfiles": [FIX], "args": {"seconds": 300}})
    assert s == 202, b
    jid = b["jobid"]

    async def running():
        s, j = await ahttp("GET", c.url(0) + f"/jobs/{jid}")
        return j if j.get("state") == "RUNNING" else None
    job = await apoll(running, 30, what="job running")
    peer = next(p for p in c.peers if p.node == job["node"])
    return peer, await apoll(lambda: next((jp.pid for jp in peer.ground.executor._procs.values()
                                           if jp.pid > 0), None), 10, what="job pid")


async def test_stop_with_a_stuck_component_and_a_frozen_zygote(tmp_path):
    c = InProcessCluster(str(tmp_path), 2, {"jobmanager.slots": 4})
    release = asyncio.Event()
    try:
        await c.start()
        peer, job_pid = await _running_job(c, 0)
        zygote_pid = peer.ground.executor.proc.pid

        async def stuck():  # a component that ignores its cancellation (until released)
            while not release.is_set():
                try:
                    await release.wait()
                except asyncio.CancelledError:
                    continue
        peer.parts.dispatcher.close = stuck
        os.kill(zygote_pid, signal.SIGSTOP)  # and a zygote that cannot read its EOF
        t0 = time.monotonic()
        await asyncio.wait_for(peer.stop(timeout=4.0), 30)
        took = time.monotonic() - t0
        c.peers.remove(peer)  # stopped: not again by c.stop()
        assert took < 15, f"stop took {took:.1f} s"
        await apoll(lambda: _gone(zygote_pid) and _gone(job_pid), 10,
                    what="zygote and job process gone")
    finally:
        release.set()
        await c.stop()


async def test_minicluster_stop_leaves_no_process(tmp_path):
    c = InProcessCluster(str(tmp_path), 2, {"jobmanager.slots": 4})
    pids = []
    try:
        await c.start()
        peer, job_pid = await _running_job(c, 0)
        pids = [job_pid] + [p.ground.executor.proc.pid for p in c.peers]
    finally:
        t0 = time.monotonic()
        await c.stop(timeout=20)
        assert time.monotonic() - t0 < 30
    await apoll(lambda: all(_gone(p) for p in pids), 10, what="every process gone")
