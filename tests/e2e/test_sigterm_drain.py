"""A peer told to stop with SIGTERM drains first (jobmanager.stop.drain-deadline,
jm/cluster/members/stopdrain.py), on real peer processes: a rolling restart by SIGTERM alone (no
drain command) moves every streaming job with a savepoint and never restarts one, each
sink holds every batch exactly once, and a restarted peer takes work again; an operator's
drain survives a restart; a second SIGTERM stops a draining peer at once. And a pod's life
in a StatefulSet (jm/local/kube.py): a peer that is not a member joins through a seed
before it starts, and leaves (drained) when it is scaled away.

One cluster serves every test of the module (in order), to keep the slow suite short."""
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.e2e.procs import ProcessCluster, _running, node_id, started, submit
from tests.helpers import ROOT, http, local_lines, poll
from tests.integration.test_savepoints_moves import batches

pytestmark = pytest.mark.slow
FIX = os.path.join(ROOT, "tests", "integration") + "/"
DEADLINE = 30.0  # s: jobmanager.stop.drain-deadline here (a second SIGTERM beats it)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("sigterm")
    c = ProcessCluster(str(base), 3, {"jobmanager.slots": 4, "rebalance.strategy": "none",
                                      "restart-strategy.type": "none",
                                      "jobmanager.stop.drain-deadline": f"{DEADLINE:g} s"})
    with started(c):
        yield c


def nodes(c, avoid=None):
    """/nodes from the first live peer that answers (an election may be under way)."""
    def ask():
        for i in sorted(c.live):
            if i != avoid:
                try:
                    s, b = http("GET", c.urls[i] + "/nodes", timeout=5)
                except OSError:
                    continue
                if s == 200:
                    return {n["id"]: n for n in b["nodes"]}
        return None
    return poll(ask, 30, interval=0.1, what="a peer answering /nodes")


def log_text(c, i):
    logs = os.path.join(c.base, "log")
    port = c.lines[i].split(":")[1]
    return "".join(open(os.path.join(logs, n)).read() for n in os.listdir(logs)
                   if n.endswith(".log") and port in n)


def sigterm(c, i, timeout=DEADLINE + 30):
    """SIGTERM to peer i (by pid) and wait until it has exited; -> its pid."""
    pid = c.live.pop(i)
    os.kill(pid, signal.SIGTERM)
    poll(lambda: not _running(pid), timeout, interval=0.1, what=f"peer {i} ({pid}) to exit")
    return pid


def start_again(c, i):
    """Start peer i again and wait until it registered with its new pid; -> that pid."""
    pid = c.start_peer(i)
    c.wait_healthy(i)
    poll(lambda: nodes(c).get(c.nodes[i], {}).get("pid") == pid, 60, interval=0.1,
         what=f"peer {i} registered again")
    return pid


def _running_job(c, jid):
    j = http("GET", c.urls[0] + f"/jobs/{jid}")[1]
    return j if j["state"] == "RUNNING" else None


def test_rolling_restart_by_sigterm_alone(cluster, tmp_path):
    c = cluster
    outs = [tmp_path / f"ticks{i}" for i in range(4)]
    tickers = [submit(c.urls[0], {"entry": "jobs_fixture:ticker", "pyfiles": [FIX],
                                  "job-type": "streaming",
                                  "args": {"output": str(out), "interval": 0.05}})
               for out in outs]
    poll(lambda: all(http("GET", c.urls[0] + f"/jobs/{j}")[1]["state"] == "RUNNING"
                     for j in tickers), 60, what="tickers running")
    for i in range(len(c.lines)):
        held = nodes(c)[c.nodes[i]]["jobs"]
        mark = len(log_text(c, i))
        sigterm(c, i)
        # it drained before it stopped: nothing was left on it (the other replicas apply
        # its last release a moment later: within a heartbeat, long before it could be
        # declared dead, which would empty it too)
        poll(lambda: nodes(c, avoid=i)[c.nodes[i]]["jobs"] == [], 1.0, interval=0.05,
             what=f"peer {i} empty")
        text = log_text(c, i)[mark:]
        assert f"draining before it stops: {len(held)} job(s)" in text, text[-3000:]
        assert "drained in" in text
        start_again(c, i)
        # the drain its stop began ended: it takes work again
        poll(lambda: nodes(c)[c.nodes[i]]["state"] == "ALIVE", 30, interval=0.1,
             what=f"peer {i} undrained")
    for jid, out in zip(tickers, outs):
        # (a job the last peer's drain moved may still be starting on its new peer)
        j = poll(lambda: _running_job(c, jid), 60, interval=0.1, what=f"{jid} running")
        # no drain restarted it; a peer that lost its lease on a stalled machine restarts
        # its jobs (fencing, not the drain): those restarts are told by their exception
        fenced = [e for e in http("GET", c.urls[0] + f"/jobs/{jid}/exceptions")[1][
            "all-exceptions"] if e["exception"].startswith("LeaseExpired")]
        assert j["restarts"] == len(fenced), (j, fenced)
        reasons = [a["end-reason"] for a in j["attempts"][:-1]]
        # every job was on some peer when it stopped: it moved (with a savepoint), and it
        # was never lost, failed or restarted
        assert reasons and set(reasons) == {"moved"}, j["attempts"]
        n = len(batches(str(out)))  # every batch exactly once, attempts never interleave
        poll(lambda: len(batches(str(out))) > n, 30, what="the ticker goes on")
    for jid in tickers:
        http("PATCH", c.urls[0] + f"/jobs/{jid}")  # cancel: room for the next tests


def test_an_operators_drain_survives_a_restart(cluster):
    c = cluster
    node = c.nodes[1]
    s, b = http("POST", c.urls[0] + f"/nodes/{node}/drain")
    assert s in (200, 202), b
    mark = len(log_text(c, 1))
    sigterm(c, 1)
    pid = start_again(c, 1)
    poll(lambda: "drained by an operator; it stays drained" in log_text(c, 1)[mark:], 30,
         interval=0.1, what="the restarted peer to look at its drain")
    n = nodes(c)[node]
    assert n["pid"] == pid and n["state"] == "DRAINED", n
    s, b = http("DELETE", c.urls[0] + f"/nodes/{node}/drain")
    assert s in (200, 202), b
    poll(lambda: nodes(c)[node]["state"] == "ALIVE", 30, what="undrained")


def _running_batch_job(c) -> tuple:
    """A long batch job, RUNNING: (its id, its peer's node id, that peer's index)."""
    jid = submit(c.urls[0], {"entry": "jobs_fixture:sleepy", "pyfiles": [FIX],
                             "args": {"seconds": 600}})
    poll(lambda: http("GET", c.urls[0] + f"/jobs/{jid}")[1]["state"] == "RUNNING", 60,
         what="the batch job running")
    where = http("GET", c.urls[0] + f"/jobs/{jid}")[1]["node"]
    return jid, where, c.index_of(where)


def test_a_second_sigterm_stops_at_once(cluster):
    c = cluster
    jid, where, i = _running_batch_job(c)
    pid = c.live[i]
    mark = len(log_text(c, i))  # (the log of its earlier runs too)
    os.kill(pid, signal.SIGTERM)
    # the batch job keeps it draining (until the deadline, 30 s)
    poll(lambda: "draining before it stops: 1 job(s)" in log_text(c, i)[mark:], 30,
         interval=0.1, what="the drain to begin")
    assert _running(pid) and nodes(c, avoid=i)[where]["state"] == "DRAINING"
    os.kill(pid, signal.SIGTERM)
    poll(lambda: not _running(pid), DEADLINE / 3, interval=0.1,
         what="the peer to stop at the second SIGTERM")
    assert "second signal, stopping at once" in log_text(c, i)[mark:]
    c.live.pop(i)
    start_again(c, i)
    poll(lambda: nodes(c)[where]["state"] == "ALIVE", 30, interval=0.1,
         what="the restarted peer undrained")
    http("PATCH", c.urls[0] + f"/jobs/{jid}")
    assert node_id(c.lines[i]) == where


def test_stop_no_drain_stops_at_once(cluster):
    """bin/jobmanager.sh stop --no-drain: a second signal right after the first."""
    c = cluster
    jid, where, i = _running_batch_job(c)
    mark = len(log_text(c, i))
    began = time.monotonic()
    r = c.run("jobmanager.sh", "stop", c.lines[i], "--no-drain")
    assert r.returncode == 0, r.stdout + r.stderr
    assert time.monotonic() - began < DEADLINE / 3  # no drain: the job did not hold it
    text = log_text(c, i)[mark:]  # (the second signal before or during the drain's start)
    assert ("stops without draining: a second signal came first" in text
            or "second signal, stopping at once" in text), text
    c.live.pop(i)
    start_again(c, i)
    http("PATCH", c.urls[0] + f"/jobs/{jid}")


def kube(c, action, line):
    r = subprocess.run([sys.executable, "-m", "jm.local.kube", action, "--conf-dir",
                        c.conf_dir, "--peer", line], env=c.env, capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    return r.returncode, r.stderr


def test_a_pod_joins_through_a_seed_and_leaves_when_scaled_away(cluster):
    c = cluster
    line, = local_lines(1)  # not in conf/masters: a pod past the seeds
    node = node_id(line)
    rc, err = kube(c, "join", line)
    assert rc == 0 and "not a member yet" in err and "added to the cluster" in err, err
    r = c.run("jobmanager.sh", "start", line)
    assert r.returncode == 0, r.stderr
    poll(lambda: nodes(c).get(node, {}).get("state") == "ALIVE", 60, interval=0.1,
         what="the new pod's peer registered")
    pid = nodes(c)[node]["pid"]
    c.all_pids.add(pid)
    rc, err = kube(c, "join", line)  # started again (a restart): a member already
    assert rc == 0 and "a member already" in err, err
    rc, err = kube(c, "leave", line)  # its preStop when scaled away
    assert rc == 0 and "left the cluster" in err, err
    poll(lambda: not _running(pid), 60, interval=0.1, what="the removed peer to stop")
    assert node not in nodes(c)
