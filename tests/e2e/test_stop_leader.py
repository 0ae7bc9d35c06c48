"""A graceful stop of the Raft leader never fences the cluster (issue 46): 20 times in a
row, `bin/jobmanager.sh stop` of whichever peer leads, then `start` again, with streaming
jobs on every peer (rebalancing on join brings them back to the restarted peer). Each
time the stopping leader hands leadership over at once and stays out of elections, so no
other peer's lease runs out: no job of a peer that was not stopped changes its attempt,
no job restarts (restarts 0, no LeaseExpired), every job of the stopped leader moves with
a savepoint (its attempt ended "moved"), and every sink holds each batch exactly once."""
import glob
import os

import pytest

from tests.e2e.procs import ProcessCluster, assert_gone, job, node_id, started, submit
from tests.helpers import ROOT, http, poll
from tests.integration.test_savepoints_moves import batches

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
FIX = os.path.join(ROOT, "tests", "integration") + "/"
ROUNDS = 20
PER_PEER = 2
FENCED = "no heartbeat acknowledged"  # a peer's log when its lease runs out


@pytest.fixture
def cluster(tmp_path):
    c = ProcessCluster(str(tmp_path), 3, {"jobmanager.slots": 4,
                                          "restart-strategy.type": "none",
                                          "rebalance.strategy": "on-join",
                                          "rebalance.interval": "500 ms",
                                          "jobmanager.stop.drain-deadline": "30 s"})
    with started(c):
        yield c


def jobs_by_node(c, url: str) -> dict[str, list[str]]:
    return {n["id"]: sorted(n["jobs"]) for n in http("GET", url + "/nodes")[1]["nodes"]
            if n["state"] == "ALIVE"}


def spread(c, url: str, tickers: list[str]):
    """Every ticker RUNNING and every peer running PER_PEER of them: {job: (node,
    attempt)}, or None while not."""
    by = jobs_by_node(c, url)
    if len(by) != len(c.lines) or any(len(js) != PER_PEER for js in by.values()):
        return None
    views = {j: job(url, j) for j in tickers}
    if any(v["state"] != "RUNNING" for v in views.values()):
        return None
    return {j: (v["node"], v["attempt"]) for j, v in views.items()}


def test_twenty_graceful_stops_of_the_leader_fence_nobody(cluster, tmp_path):
    c = cluster
    outs = {}
    for k in range(PER_PEER * len(c.lines)):
        out = tmp_path / f"ticks{k}"
        jid = submit(c.urls[k % len(c.lines)], {
            "entry": "jobs_fixture:ticker", "pyfiles": [FIX], "job-type": "streaming",
            "args": {"output": str(out), "interval": 0.05}})
        outs[jid] = out
    tickers = sorted(outs)
    index = {node_id(ln): i for i, ln in enumerate(c.lines)}
    stopped = []
    for rnd in range(ROUNDS):
        url = c.urls[0]
        before = poll(lambda: spread(c, url, tickers), 60, interval=0.2,
                      what=f"round {rnd}: every peer runs {PER_PEER} tickers")
        leader = http("GET", url + "/overview")[1]["leader"]
        i = index[leader]
        others = [u for k, u in enumerate(c.urls) if k != i]
        pid = c.live[i]
        r = c.run("jobmanager.sh", "stop", c.lines[i])
        assert r.returncode == 0, r.stderr
        assert_gone([pid], f"round {rnd}: the stopped leader")
        c.live.pop(i)
        stopped.append(leader)
        # another peer leads, and the leader's jobs run there, each moved once
        new = poll(lambda: (lambda lead: lead if lead not in (None, leader) else None)(
            http("GET", others[0] + "/overview")[1].get("leader")), 10, interval=0.05,
            what=f"round {rnd}: a new leader")
        moved = [j for j, (n, _) in before.items() if n == leader]
        assert moved, before

        def moved_running():
            views = {j: job(others[0], j) for j in moved}
            return all(v["state"] == "RUNNING" and v["node"] != leader
                       for v in views.values()) and views
        views = poll(moved_running, 60, interval=0.1, what=f"round {rnd}: moved jobs running")
        for j, v in views.items():
            assert v["attempt"] == before[j][1] + 1 and v["restarts"] == 0, v
            ended = next(a for a in v["attempts"] if a["attempt"] == before[j][1])
            assert ended["end-reason"] == "moved", (rnd, ended)
        # the other peers' jobs went on in the same attempt on the same peer
        for j, (n, attempt) in before.items():
            if n != leader:
                v = job(others[0], j)
                assert (v["node"], v["attempt"], v["restarts"]) == (n, attempt, 0), \
                    (rnd, new, v)
        c.start_peer(i)
        c.wait_healthy(i, 60, interval=0.05)
    assert len(set(stopped)) >= 2, stopped  # the leadership went round

    poll(lambda: spread(c, c.urls[0], tickers), 60, interval=0.2, what="tickers spread")
    for jid, out in outs.items():
        v = job(c.urls[0], jid)
        assert v["state"] == "RUNNING" and v["restarts"] == 0, v
        assert all(a["end-reason"] == "moved" for a in v["attempts"]
                   if a["end-time"] not in (None, -1)), v["attempts"]
        n = len(batches(str(out)))  # each batch exactly once, attempts never interleave
        poll(lambda: len(batches(str(out))) > n, 30, what="the ticker goes on")
    for jid in tickers:
        s, ex = http("GET", c.urls[0] + f"/jobs/{jid}/exceptions")
        assert s == 200 and "LeaseExpired" not in str(ex), ex
    for path in glob.glob(os.path.join(c.base, "log", "*.log")):
        with open(path, errors="replace") as f:
            fenced = [ln for ln in f if FENCED in ln or "LeaseExpired" in ln]
        assert not fenced, (path, fenced[:3])
