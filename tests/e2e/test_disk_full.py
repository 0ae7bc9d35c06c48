"""A full disk under one peer (its data dir on a small tmpfs the test mounts): the peer
says so in /healthz and its log, its Raft waits for the disk instead of failing (no
corrupt journal, no crash: a store into an unbacked page of the journal's mapping would
be a SIGBUS), its lease runs out and its jobs move; once there is room again it rejoins
by itself with every entry, also across a restart."""
import os
import shutil
import subprocess
import uuid

import pytest

from tests.e2e.procs import ProcessCluster
from tests.helpers import ROOT, end_session, http, poll

pytestmark = pytest.mark.slow
FIX = os.path.join(ROOT, "tests", "integration") + "/"
TMPFS = "8m"


def _can_mount() -> bool:
    return os.geteuid() == 0 and shutil.which("mount") is not None


@pytest.fixture
def cluster(tmp_path):
    if not _can_mount():
        pytest.skip("needs root to mount a tmpfs")
    c = ProcessCluster(str(tmp_path), 3, {"jobmanager.slots": 2})
    host, _, raft = c.lines[2].split(":")
    c.full_dir = os.path.join(str(tmp_path), "data", f"{host}_{raft}")
    os.makedirs(c.full_dir)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS}", "tmpfs", c.full_dir],
                   check=True)
    try:
        c.start()
        yield c
    finally:
        pids = c.pids()
        try:
            c.stop()
        finally:
            from tests.e2e.procs import assert_gone
            try:
                assert_gone(pids, "peers")
            finally:
                subprocess.run(["umount", "-l", c.full_dir], check=False)


def health(url):
    return http("GET", url + "/healthz")[1]


def job(url, jid):
    return http("GET", url + f"/jobs/{jid}")[1]


def count_jobs(url):
    return http("GET", url + "/jobs")[1]["total"]


def submit(url, spec):
    """As a client does: a 503 (the full peer may be the leader: its Raft stops, and a write
    in flight then fails with LEADER_CHANGED while the others elect a new one) or no answer
    is retried with the same X-Request-Id, which the cluster accepts only once."""
    rid = str(uuid.uuid4())

    def attempt():
        try:
            s, b = http("POST", url + "/jobs", spec, headers={"X-Request-Id": rid}, timeout=30)
        except OSError:
            return None
        assert s in (202, 503), b
        return b if s == 202 else None
    return poll(attempt, 90, what="the submission accepted")


def write(method, url, want):
    """A write as a client sends it: a 503 (no leader for a moment: the full peer may have
    led) or no answer is sent again (drain, undrain and cancel are idempotent)."""
    def attempt():
        try:
            s, b = http(method, url, timeout=30)
        except OSError:
            return None
        assert s in (want, 503), (s, b)
        return s == want
    poll(attempt, 90, what=f"{method} {url} answered {want}")


def fill(path):
    """Take every free byte of the filesystem at `path` (ENOSPC ends the write)."""
    filler = os.path.join(path, "filler")
    with open(filler, "wb") as f:
        try:
            while True:
                f.write(b"\0" * (64 * 1024))
                f.flush()
        except OSError:
            pass
    return filler


def test_a_full_disk_holds_the_peer_moves_its_jobs_and_it_recovers(cluster):
    c = cluster
    # plain requests: the full peer cannot apply what the others acknowledge (the test
    # writes and reads through one peer, and polls the full one)
    end_session(c.urls)
    full, other = c.urls[2], c.urls[0]
    node = http("GET", full + "/healthz")[1]["node"]
    # a batch job on the peer whose disk fills up (least loaded: submit until it is there)
    jid = None
    for _ in range(4):
        s, b = http("POST", other + "/jobs", {"entry": "jobs_fixture:sleepy", "pyfiles": [FIX],
                                              "args": {"seconds": 600}})
        assert s == 202, b
        poll(lambda: job(other, b["jobid"])["state"] == "RUNNING", 60, what="running")
        if job(other, b["jobid"])["node"] == node:
            jid = b["jobid"]
            break
    assert jid is not None
    assert health(full)["disk-problem"] is None

    filler = fill(c.full_dir)
    # the journal has room written ahead; entries beyond it need more disk: big specs of
    # jobs that wait (every peer drained, so nothing runs) and are cancelled then
    ids = [n["id"] for n in http("GET", other + "/nodes")[1]["nodes"]]
    for n in ids:
        write("POST", other + f"/nodes/{n}/drain", 202)
    big = {"entry": "jobs_fixture:quick", "pyfiles": [FIX], "args": {"pad": "x" * 200_000}}
    waiting = []
    for _ in range(40):  # the other two peers are a majority: writes go on
        waiting.append(submit(other, big)["jobid"])

    h = poll(lambda: (lambda h: h if h["disk-problem"] else None)(health(full)), 60,
             what="the full peer to say so in /healthz")
    assert h["ok"] is False and "No space left" in h["disk-problem"]
    log = open(next(os.path.join(c.base, "log", n) for n in os.listdir(os.path.join(c.base, "log"))
                    if n.endswith(full.rsplit(":", 1)[1] + ".log"))).read()
    assert "waits for its disk" in log
    for jid_ in waiting:
        write("PATCH", other + f"/jobs/{jid_}?mode=cancel", 202)
    for n in ids:
        if n != node:
            write("DELETE", other + f"/nodes/{n}/drain", 200)
    # it cannot keep its lease: its job moves (a new attempt elsewhere, the old one ended)
    moved = poll(lambda: (lambda j: j if j["node"] not in (None, node)
                          and j["state"] == "RUNNING" else None)(job(other, jid)), 60,
                 what="the job to move off the full peer")
    assert moved["attempts"][0]["end-reason"] == "peer-lost" and moved["attempt"] == 2

    # room again: it catches up and registers again by itself
    os.unlink(filler)
    poll(lambda: health(full)["ok"] and health(full)["disk-problem"] is None, 60,
         what="the peer to recover")
    total = count_jobs(other)
    poll(lambda: count_jobs(full) == total, 30, what="the recovered replica to catch up")
    write("DELETE", other + f"/nodes/{node}/drain", 200)  # (drained above)
    nodes = {n["id"]: n for n in http("GET", other + "/nodes")[1]["nodes"]}
    assert nodes[node]["state"] == "ALIVE"  # registered again after it was declared dead

    # its journal is whole: after a restart it has every entry
    c.run("jobmanager.sh", "stop", c.lines[2])
    c.start_peer(2)
    c.wait_healthy(2)
    poll(lambda: count_jobs(full) == total, 30, what="every entry after a restart")
