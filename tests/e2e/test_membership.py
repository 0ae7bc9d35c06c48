"""Membership changes online with real peer processes (bin/jobmanager.sh), real Raft and
the jm CLI: a 3-peer cluster grows to 4 (the new peer is not in conf/masters, joins
through it as a non-voting member: the voting core of 3 is full), a live peer is removed
(its streaming job moves with a savepoint, its batch job restarts elsewhere after the
deadline, the peer stops by itself; a voter removed is replaced by promoting the
non-voter), a dead peer is removed at once and replaced by a new host, the removed peer
cannot come back unasked, an added peer restarts from its own members file, and the
leader itself is removed (it hands leadership over first: no other peer's job restarts).
A dead voter removed leaves the Raft voters at once (no wait for the peer) and the core
heals by promotion: a second voter lost then does not take the majority with it."""
import os
import signal
import subprocess
import sys

import pytest

from jm.local.localcluster import local_lines
from tests.e2e.procs import ProcessCluster, _running, assert_gone, job, node_id, submit
from tests.helpers import ROOT, http, poll

pytestmark = pytest.mark.slow
FIX = os.path.join(ROOT, "tests", "integration") + "/"
# not lost: a job a removal moved may still be starting on its new peer (INITIALIZING)
KEPT = ("CREATED", "INITIALIZING", "RUNNING")


# 6 slots: the two peers left at the end hold every job of the test (a ticker, at most 8
# batch jobs, the last quick job)
@pytest.fixture
def cluster(tmp_path):
    c = ProcessCluster(str(tmp_path), 3, {"jobmanager.slots": 6, "heartbeat.timeout": "4 s",
                                          "jobmanager.lease-timeout": "2 s",
                                          "rebalance.strategy": "none"})
    c.extra = local_lines(2)  # hosts that are not in conf/masters: D and E
    try:
        c.start()
        yield c
    finally:
        pids = c.pids()
        for line in c.extra:
            c.run("jobmanager.sh", "stop", line)
        c.stop()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert_gone(pids, "peers")



def url_of(line):
    return "http://127.0.0.1:" + line.split(":")[1]


def jm(url, *args):
    r = subprocess.run([sys.executable, "-m", "jm.client.cli", "-a", url, *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout, r.stderr


def members(url):
    """Every member: the Raft voters and the non-voting members."""
    s, b = http("GET", url + "/cluster/peers")
    assert s == 200, b
    return sorted(m["id"] for m in b["members"] + b["non-voters"])


def voters(url):
    s, b = http("GET", url + "/cluster/peers")
    assert s == 200, b
    return sorted(m["id"] for m in b["members"])


def nodes(url):
    return {n["id"]: n for n in http("GET", url + "/nodes")[1]["nodes"]}




def peer_pid(c, line):
    host, rest, _ = line.split(":")
    run = os.path.join(c.base, "run")
    name = next(n for n in os.listdir(run) if n.endswith(f"-{host}_{rest}.pid"))
    return int(open(os.path.join(run, name)).read())


def raft_dir(c, line):
    return os.path.join(c.base, "data", node_id(line).replace(":", "_"), "raft")


def leader_line(url, lines):
    leader = http("GET", url + "/overview")[1]["leader"]
    return next((ln for ln in lines if node_id(ln) == leader), None)


def test_grow_remove_replace_and_remove_the_leader_online(cluster, tmp_path):
    c = cluster
    d, e = c.extra
    live = list(c.lines)
    url = c.urls[0]

    # ---- grow: D becomes a member first, then starts and joins through conf/masters -----
    rc, out, err = jm(url, "cluster", "add-peer", d)
    assert rc == 0, err
    assert f"bin/jobmanager.sh start {d}" in out
    live.append(d)
    assert members(url) == sorted(map(node_id, live))
    assert nodes(url)[node_id(d)]["state"] == "JOINING"
    rc, _, err = jm(url, "cluster", "add-peer", d)
    assert rc == 1 and "is a member already" in err
    r = c.run("jobmanager.sh", "start", d)
    assert r.returncode == 0, r.stderr
    poll(lambda: nodes(url)[node_id(d)]["state"] == "ALIVE", 60, what="D registered")
    assert nodes(url_of(d))[node_id(d)]["raft-role"] == "non-voter"  # the core is full
    assert voters(url) == sorted(map(node_id, c.lines))
    rc, out, _ = jm(url, "cluster")
    assert rc == 0 and node_id(d) in out and "RAFT" in out

    # new jobs use it at once: a streaming job and one batch job per peer (spread)
    ticker = submit(url, {"entry": "jobs_fixture:ticker", "pyfiles": [FIX],
                          "job-type": "streaming", "args": {"output": str(tmp_path / "ticks")}})
    poll(lambda: job(url, ticker)["state"] == "RUNNING", 60, what="ticker running")
    victim = next(ln for ln in live if node_id(ln) == job(url, ticker)["node"])
    sleepy, where = [], {}
    while node_id(victim) not in where.values():  # least-loaded placement: soon there
        assert len(sleepy) < 8, where
        sleepy.append(submit(url, {"entry": "jobs_fixture:sleepy", "pyfiles": [FIX],
                                   "args": {"seconds": 600}}))
        poll(lambda: job(url, sleepy[-1])["state"] == "RUNNING", 60, what="batch job running")
        where[sleepy[-1]] = job(url, sleepy[-1])["node"]
    assert node_id(d) in {*where.values(), node_id(victim)}  # the new peer got work
    batch = next(j for j, n in where.items() if n == node_id(victim))

    # ---- remove a live peer: its streaming job moves with a savepoint, its batch job
    # restarts elsewhere once the deadline passes, then it leaves Raft and stops ---------
    pid = peer_pid(c, victim)
    live.remove(victim)
    url = url_of(live[0])
    rc, out, err = jm(url, "cluster", "remove-peer", node_id(victim), "--deadline", "1s",
                      "--wait", "--wait-timeout", "90")
    assert rc == 0, err
    assert "REMOVED" in out
    assert members(url) == sorted(map(node_id, live))
    for jid in (batch, ticker):
        j = job(url, jid)
        assert j["node"] != node_id(victim) and j["state"] in KEPT, j
    assert job(url, ticker)["attempt"] >= 2
    assert_gone([pid], "the removed peer")  # it stopped by itself
    assert not os.path.exists(raft_dir(c, victim))
    assert node_id(victim) not in nodes(url)
    # a voter removed: the non-voter D takes its place (a non-voter removed: no change)
    poll(lambda: len(voters(url)) == 3, 60, what="the voting core whole again")
    assert voters(url) == sorted(map(node_id, live))

    # ---- a new host E joins (4 members, 3 voting); a voter is killed and, once dead,
    # removed: it leaves the Raft voters at once, E is promoted in its place, so losing a
    # second voter then still leaves a majority (3 voters, 2 alive) -------------------
    rc, out, err = jm(url, "cluster", "add-peer", e)
    assert rc == 0 and "non-voting member" in out, (out, err)
    r = c.run("jobmanager.sh", "start", e)
    assert r.returncode == 0, r.stderr
    live.append(e)
    poll(lambda: nodes(url)[node_id(e)]["state"] == "ALIVE", 60, what="E registered")
    assert len(members(url)) == 4 and len(voters(url)) == 3
    gone = next(ln for ln in live if ln != leader_line(url, live)
                and node_id(ln) in voters(url))
    pid = peer_pid(c, gone)
    os.kill(pid, signal.SIGKILL)
    assert_gone([pid], "the killed peer")
    live.remove(gone)
    url = url_of(leader_line(url_of(e), live))
    poll(lambda: nodes(url)[node_id(gone)]["state"] == "DEAD", 60, what="declared dead")
    rc, out, err = jm(url, "cluster", "remove-peer", node_id(gone))
    assert rc == 0 and "REMOVED" in out, err
    # answered only once the voting core is whole again: E promoted in its place and
    # committed, the dead voter out of the Raft voters
    assert len(voters(url)) == 3 and node_id(gone) not in voters(url), voters(url)
    assert node_id(e) in voters(url)
    assert not http("GET", url + "/cluster/peers")[1]["pending"]
    # so the leader killed right after the answer still leaves a majority (2 of 3): a
    # new leader within the election time, and every job goes on
    second = leader_line(url, live)
    pid2 = peer_pid(c, second)
    os.kill(pid2, signal.SIGKILL)
    assert_gone([pid2], "the killed leader")
    rest = [ln for ln in live if ln != second]
    url = url_of(rest[0])
    poll(lambda: leader_line(url, rest) is not None, 15, what="a new leader of 2 of 3")
    quick = submit(url, {"entry": "jobs_fixture:quick", "pyfiles": [FIX]})
    poll(lambda: job(url, quick)["state"] == "FINISHED", 60, what="a job with 2 of 3 alive")
    assert not http("GET", url + "/cluster/peers")[1]["pending"]
    assert members(url) == sorted(map(node_id, live))
    r = c.run("jobmanager.sh", "start", second)  # back with its data: still a member
    assert r.returncode == 0, r.stderr
    poll(lambda: http("GET", url_of(second) + "/healthz")[1].get("ok")
         and nodes(url)[node_id(second)]["state"] == "ALIVE", 60, what="second back")
    quick = submit(url_of(e), {"entry": "jobs_fixture:quick", "pyfiles": [FIX]})
    poll(lambda: job(url, quick)["state"] == "FINISHED", 60, what="a job on the new cluster")
    for ln in live:
        assert members(url_of(ln)) == sorted(map(node_id, live))

    # ---- the killed peer comes back with its old data: removed, it refuses to run -----
    r = c.run("jobmanager.sh", "start", gone)
    assert r.returncode == 0, r.stderr
    back = peer_pid(c, gone)
    poll(lambda: not _running(back), 60, what="the removed peer to exit")
    logs = os.path.join(c.base, "log")
    text = "".join(open(os.path.join(logs, n)).read() for n in os.listdir(logs)
                   if n.endswith(".log") and gone.split(":")[1] in n)
    assert "was removed from the cluster" in text
    assert members(url) == sorted(map(node_id, live))

    # ---- E (added online, not in conf/masters) restarts and rejoins ---------------------
    r = c.run("jobmanager.sh", "stop", e)
    assert r.returncode == 0, r.stderr
    r = c.run("jobmanager.sh", "start", e)
    assert r.returncode == 0, r.stderr
    poll(lambda: http("GET", url_of(e) + "/healthz")[1].get("ok")
         and nodes(url)[node_id(e)]["state"] == "ALIVE", 60, what="E back")

    # ---- remove the leader itself: leadership moves, it leaves and stops ---------------
    old = leader_line(url, live)
    pid = peer_pid(c, old)
    # the others' jobs: the removed leader hands leadership over before it leaves, so no
    # peer's lease runs out and none of them restarts
    stay = {j: (v["node"], v["attempt"], v["restarts"])
            for j in [ticker, *sleepy] if (v := job(url, j))["node"] != node_id(old)
            and v["state"] == "RUNNING"}
    live.remove(old)
    url = url_of(live[0])
    rc, out, err = jm(url, "cluster", "remove-peer", node_id(old), "--deadline", "0s",
                      "--wait", "--wait-timeout", "90")
    assert rc == 0, err
    assert_gone([pid], "the removed leader")
    poll(lambda: leader_line(url_of(live[1]), live) is not None, 30,
         what="a new leader among the rest")
    assert members(url) == sorted(map(node_id, live))
    quick = submit(url_of(live[1]), {"entry": "jobs_fixture:quick", "pyfiles": [FIX]})
    poll(lambda: job(url, quick)["state"] == "FINISHED", 60, what="a job afterwards")
    for j in [ticker, *sleepy]:  # no job was lost on the way
        assert job(url, j)["state"] in KEPT
    for j, was in stay.items():
        v = job(url, j)
        assert (v["node"], v["attempt"], v["restarts"]) == was, (j, was, v)
