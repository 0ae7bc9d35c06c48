"""A small voting core and non-voting members with real peer processes (bin/), real Raft
and the jm CLI: five peers of conf/masters with raft.voters 3; the last two are non-voting
members (no Raft port, no journal), shown as such by GET /cluster/peers and `jm cluster`;
they take submissions, run jobs and serve reads from their own replica; a killed
non-voter's jobs move and it comes back from the leader's snapshot; with two voters of
three down, the non-voters do not make a quorum: writes through them are refused (503) and
they fence their jobs like every peer cut off from the majority. The core heals itself:
a voter removed, or dead past raft.voter-replace-after, is replaced by promoting a live
non-voter in place (one that does not answer is not caught up: 409), so a second voter
lost afterwards still leaves a majority; the dead voter comes back as a non-voter."""
import os
import signal
import subprocess
import sys

import pytest

from tests.e2e.procs import ProcessCluster, _running, assert_gone, job, node_id, started, submit
from tests.helpers import ROOT, http, poll

pytestmark = pytest.mark.slow
FIX = os.path.join(ROOT, "tests", "integration") + "/"


@pytest.fixture
def cluster(tmp_path):
    c = ProcessCluster(str(tmp_path), 5, {"jobmanager.slots": 4, "raft.voters": 3,
                                          "raft.voter-replace-after": "2 s",
                                          "rebalance.strategy": "none"})
    with started(c):
        yield c



def peers(url):
    s, b = http("GET", url + "/cluster/peers")
    assert s == 200, b
    return b




def listening(port):
    with open("/proc/net/tcp") as f:
        return any(int(ln.split()[1].split(":")[1], 16) == port and ln.split()[3] == "0A"
                   for ln in f.readlines()[1:])


def test_non_voting_members_serve_run_jobs_move_and_never_vote(cluster):
    c = cluster
    voters, readers = c.lines[:3], c.lines[3:]
    urls = dict(zip(c.lines, c.urls))
    view = peers(urls[readers[0]])
    assert sorted(m["id"] for m in view["members"]) == sorted(map(node_id, voters))
    assert [(n["id"], n["role"]) for n in view["non-voters"]] == \
        [(r, "non-voter") for r in sorted(map(node_id, readers))]
    for r in readers:  # no Raft port, no journal: a reader of the leader's log
        assert not listening(int(r.split(":")[2]))
        raft = os.path.join(c.base, "data", node_id(r).replace(":", "_"), "raft")
        assert not os.path.exists(os.path.join(raft, "raft.journal"))
    rc = subprocess.run([sys.executable, "-m", "jm.client.cli", "-a", urls[readers[1]],
                         "cluster"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert rc.returncode == 0, rc.stderr
    rows = {ln.split()[0]: ln.split()[2] for ln in rc.stdout.splitlines()
            if ln.startswith("127.0.0.1:")}
    assert sorted(rows.values()) == ["follower", "follower", "leader", "non-voter",
                                     "non-voter"], rc.stdout

    # submissions through a non-voter; least-loaded placement puts jobs on every peer
    jobs = [submit(urls[readers[0]], {"entry": "jobs_fixture:sleepy", "pyfiles": [FIX],
                                      "args": {"seconds": 600}}) for _ in range(10)]
    poll(lambda: all(job(urls[readers[0]], j)["state"] == "RUNNING" for j in jobs), 90,
         what="every job running")
    where = {j: job(urls[readers[1]], j)["node"] for j in jobs}
    on_reader = [j for j, n in where.items() if n == node_id(readers[1])]
    assert on_reader, where

    # a non-voter killed: its jobs move, nobody else's restarts
    pid = c.peer_pid(4)
    os.kill(pid, signal.SIGKILL)
    assert_gone([pid], "the killed non-voter")
    poll(lambda: all(job(urls[voters[0]], j)["node"] != node_id(readers[1])
                     and job(urls[voters[0]], j)["state"] == "RUNNING" for j in on_reader),
         60, what="its jobs running elsewhere")
    assert all(job(urls[voters[0]], j)["attempt"] == 1 for j in jobs if j not in on_reader)
    # it comes back empty-handed from the leader's snapshot, as a non-voter again
    c.start_peer(4)
    poll(lambda: http("GET", urls[readers[1]] + "/healthz")[1].get("ok"), 60,
         what="the non-voter back")
    assert node_id(readers[1]) in [n["id"] for n in peers(urls[voters[0]])["non-voters"]]
    assert len(http("GET", urls[readers[1]] + "/jobs?limit=1000")[1]["jobs"]) == len(jobs)

    # two voters down: three of five processes run, but the non-voters are no
    # quorum: a write through one is refused, and every peer fences its jobs
    leader = peers(urls[readers[0]])["leader"]
    gone = [ln for ln in voters if node_id(ln) != leader][:1] + \
        [ln for ln in voters if node_id(ln) == leader]
    pids = [c.peer_pid(c.lines.index(ln)) for ln in gone]
    for p in pids:
        os.kill(p, signal.SIGKILL)
    assert_gone(pids, "two voters")
    s, b = http("POST", urls[readers[0]] + "/jobs", {"entry": "jobs_fixture:quick",
                                                     "pyfiles": [FIX]}, timeout=30)
    assert s == 503, (s, b)
    poll(lambda: http("GET", urls[readers[0]] + "/readyz")[1].get("lease-valid") is False,
         30, what="the non-voter fenced (its lease ran out)")
    assert all(_running(c.peer_pid(c.lines.index(ln))) for ln in readers)


def voters_of(url):
    return sorted(m["id"] for m in peers(url)["members"])


def test_the_voting_core_heals_itself(cluster):
    c = cluster
    a, b, cc, d, e = c.lines
    urls = dict(zip(c.lines, c.urls))
    leader = peers(urls[d])["leader"]
    # keep the leader: the voters the test takes away are the followers
    order = sorted([a, b, cc], key=lambda ln: node_id(ln) == leader)
    first, second = order[0], order[1]

    # a voter removed while E does not answer and D drains (so the leader has nobody to
    # promote meanwhile): promoting E by hand is refused (not caught up)
    e_pid = c.peer_pid(4)
    s, body = http("POST", urls[d] + f"/nodes/{node_id(d)}/drain")
    assert s == 202, body
    os.kill(e_pid, signal.SIGSTOP)
    try:
        s, body = http("DELETE", urls[d] + f"/cluster/peers/{node_id(first)}")
        assert s == 202, body
        poll(lambda: node_id(first) not in voters_of(urls[d]), 60, what="the voter gone")
        s, body = http("POST", urls[d] + f"/cluster/peers/{node_id(e)}/promote", timeout=30)
        assert s == 409 and "not caught up" in body["errors"][0], (s, body)
    finally:
        os.kill(e_pid, signal.SIGCONT)
    assert http("DELETE", urls[d] + f"/nodes/{node_id(d)}/drain")[0] == 200
    # the leader promotes one of them (in place: it takes over its Raft port)
    poll(lambda: len(voters_of(urls[d])) == 3, 60, what="a non-voter promoted")
    core = voters_of(urls[d])
    promoted, spare = (d, e) if node_id(d) in core else (e, d)
    assert node_id(first) not in core and node_id(promoted) in core
    poll(lambda: not listening(int(first.split(":")[2])), 30, what="the removed voter gone")
    assert listening(int(promoted.split(":")[2]))

    # a voter killed: dead past raft.voter-replace-after, the other non-voter replaces it
    pid = c.peer_pid(c.lines.index(second))
    os.kill(pid, signal.SIGKILL)
    assert_gone([pid], "the killed voter")
    core = sorted(set(core) - {node_id(second)} | {node_id(spare)})
    poll(lambda: voters_of(urls[promoted]) == core, 60,
         what="the other non-voter promoted in the dead voter's place")
    # so losing one more voter still leaves a majority: 2 of 3
    live = [ln for ln in c.lines if node_id(ln) in core]
    third = next(ln for ln in live if node_id(ln) != peers(urls[spare])["leader"])
    pid = c.peer_pid(c.lines.index(third))
    os.kill(pid, signal.SIGKILL)
    assert_gone([pid], "a third voter")
    alive = next(ln for ln in live if ln != third)
    jid = submit(urls[alive], {"entry": "jobs_fixture:quick", "pyfiles": [FIX]})
    poll(lambda: job(urls[alive], jid)["state"] == "FINISHED", 60, what="a job with 2 of 3")

    # the third voter comes back first (a voter still: nobody could replace it), so the
    # core is whole again; then the replaced voter comes back: a member still, as a
    # non-voter (were the third still dead past raft.voter-replace-after, the leader
    # would rightly promote the replaced one in its place)
    c.start_peer(c.lines.index(third))
    poll(lambda: http("GET", urls[third] + "/healthz")[1].get("ok"), 60, what="the third back")
    c.start_peer(c.lines.index(second))
    poll(lambda: http("GET", urls[second] + "/healthz")[1].get("ok"), 60, what="it is back")
    poll(lambda: node_id(second) in [n["id"] for n in peers(urls[alive])["non-voters"]], 30,
         what="the replaced voter back as a non-voter")
    assert voters_of(urls[alive]) == core
    assert not listening(int(second.split(":")[2]))
