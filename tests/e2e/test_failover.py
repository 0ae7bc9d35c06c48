"""Failover through real peer processes: SIGKILL of a follower and of the leader, a frozen
(SIGSTOP) peer fenced by its lease, no orphans, restarts that rejoin from the journal."""
import os
import signal
import time

import psutil
import pytest

from tests.e2e.procs import ProcessCluster, submit
from tests.helpers import ROOT, http, poll

pytestmark = pytest.mark.slow
CHAOS = os.path.join(ROOT, "chaos") + "/"


@pytest.fixture
def cluster(tmp_path):
    c = ProcessCluster(str(tmp_path), 3, {"jobmanager.executor.preload": "none",
                                          "restart-strategy.type": "none"})
    try:
        c.start()
        yield c
    finally:
        c.stop()


def overview(url):
    return {r["jid"]: r for r in http("GET", url + "/jobs/overview")[1]["jobs"]}


def nodes(url):
    return {n["id"]: n for n in http("GET", url + "/nodes")[1]["nodes"]}


def start_probes(c, n, probe_dir):
    ids = []
    for i in range(n):
        s, b = http("POST", c.urls[i % 3] + "/jobs", {"entry": "probe:main", "pyfiles": [CHAOS],
                                                     "args": {"dir": probe_dir}})
        assert s == 202, b
        ids.append(b["jobid"])
    poll(lambda: all(r["state"] == "RUNNING" for r in overview(c.urls[0]).values()), 60,
         what="probes running")
    # RUNNING is reported when the job process is spawned, before the probe's first line:
    # a fault right then would find an attempt that never wrote (nothing to check it by)
    poll(lambda: all(os.path.exists(os.path.join(probe_dir, f"{j}.log"))
                     and os.path.getsize(os.path.join(probe_dir, f"{j}.log")) > 0
                     for j in ids), 60, what="every probe writing")
    return ids


def index_of(c, node_id):
    return next(i for i, line in enumerate(c.lines) if line.endswith(node_id.split(":")[1])
                and line.startswith(node_id.split(":")[0]))


def descendants(pid):
    return [p.pid for p in psutil.Process(pid).children(recursive=True)]


def test_killed_follower_only_its_jobs_move_and_nothing_is_orphaned(cluster, tmp_path):
    c = cluster
    start_probes(c, 9, str(tmp_path / "probes"))
    ns = nodes(c.urls[0])
    leader = next(n for n, v in ns.items() if v["leader"])
    victim = max((n for n in ns if n != leader), key=lambda n: len(ns[n]["jobs"]))
    vi = index_of(c, victim)
    survivor = c.urls[(vi + 1) % 3]
    before = overview(survivor)
    mine = set(ns[victim]["jobs"])
    assert mine, "the victim should own jobs"
    kids = descendants(c.peer_pid(vi))
    assert kids, "a peer has a zygote and job processes"
    os.kill(c.peer_pid(vi), signal.SIGKILL)
    # no orphans: its zygote and job processes die with it, fast (parent-death signal)
    poll(lambda: not any(psutil.pid_exists(k) and psutil.Process(k).status() != "zombie"
                         for k in kids), 1.0, interval=0.02, what="children of the dead peer gone")
    # its jobs run elsewhere with a new attempt; nobody else's job restarted
    after = poll(lambda: (lambda o: o if all(o[j]["state"] == "RUNNING" and o[j]["node"] != victim
                                             for j in mine) else None)(overview(survivor)),
                 30, what="the dead peer's jobs RUNNING elsewhere")
    for j, row in after.items():
        if j in mine:
            assert row["attempt"] == before[j]["attempt"] + 1
        else:
            assert row["attempt"] == before[j]["attempt"] and row["node"] == before[j]["node"]
    dead = nodes(survivor)[victim]
    assert dead["state"] == "DEAD" and dead["declared-dead-at"] > 0 and dead["jobs"] == []
    job = http("GET", f"{survivor}/jobs/{next(iter(mine))}")[1]
    assert job["attempts"][-2]["end-reason"] == "peer-lost"
    assert job["attempts"][-2]["node"] == victim and job["attempts"][-1]["node"] != victim
    # restarted with the same config, it rejoins from its journal, empty
    c.start_peer(vi)
    poll(lambda: nodes(survivor)[victim]["state"] == "ALIVE", 30, what="victim back")
    assert nodes(c.urls[vi])[victim]["jobs"] == []
    assert set(overview(c.urls[vi])) == set(after)  # its replica caught up


def test_killed_leader_new_leader_writes_work_jobs_move(cluster, tmp_path):
    c = cluster
    start_probes(c, 6, str(tmp_path / "probes"))
    ns = nodes(c.urls[0])
    leader = next(n for n, v in ns.items() if v["leader"])
    li = index_of(c, leader)
    mine = set(ns[leader]["jobs"])
    assert mine, f"the leader runs no probe (spread placement puts 2 on each peer): {ns}"
    survivors = [u for i, u in enumerate(c.urls) if i != li]
    os.kill(c.peer_pid(li), signal.SIGKILL)
    seen_503 = []

    def submit():
        s, b = http("POST", survivors[0] + "/jobs", {"entry": "probe:main", "pyfiles": [CHAOS],
                                                    "args": {"dir": str(tmp_path / "p2")}})
        if s == 503:
            seen_503.append(b)
        return b if s == 202 else None
    poll(submit, 20, interval=0.1, what="writes accepted again")
    for b in seen_503:
        assert b["errors"]  # a clear error while there is no leader, never a hang
    new_leader = poll(lambda: http("GET", survivors[1] + "/overview")[1]["leader"], 10)
    assert new_leader != leader
    poll(lambda: all(overview(survivors[1])[j]["state"] == "RUNNING"
                     and overview(survivors[1])[j]["node"] != leader for j in mine), 30,
         what="the old leader's jobs RUNNING elsewhere")


def test_frozen_peer_is_fenced_before_its_jobs_move(cluster, tmp_path):
    """SIGSTOP a peer: its job processes stop within the lease (the zygote enforces it),
    its jobs move after heartbeat.timeout, and no probe ever shows two attempts at once."""
    c = cluster
    probe_dir = tmp_path / "probes"
    start_probes(c, 6, str(probe_dir))
    ns = nodes(c.urls[0])
    leader = next(n for n, v in ns.items() if v["leader"])
    victim = max((n for n in ns if n != leader), key=lambda n: len(ns[n]["jobs"]))
    vi = index_of(c, victim)
    survivor = c.urls[(vi + 1) % 3]
    mine = set(ns[victim]["jobs"])
    assert mine, f"the frozen peer runs no probe: {ns}"
    pid = c.peer_pid(vi)
    t_stop = time.time()
    os.kill(pid, signal.SIGSTOP)
    try:
        poll(lambda: all(overview(survivor)[j]["state"] == "RUNNING"
                         and overview(survivor)[j]["node"] != victim for j in mine), 30,
             what="the frozen peer's jobs RUNNING elsewhere")
    finally:
        os.kill(pid, signal.SIGCONT)
    # the thawed peer learns it was declared dead and comes back empty
    poll(lambda: nodes(survivor)[victim]["state"] == "ALIVE", 30, what="peer back")
    assert nodes(survivor)[victim]["jobs"] == []
    lease = 2.0
    for j in mine:
        lines = [ln.split() for ln in open(probe_dir / f"{j}.log")]
        old = [float(t) for _, a, node, t in lines if node == victim]
        new = [float(t) for _, a, node, t in lines if node != victim]
        assert max(old) < t_stop + lease + 0.3, "the frozen peer's job ran past its lease"
        assert min(new) > max(old), "two attempts ran at the same time"


def test_a_job_that_kills_its_peers_fails_after_three_of_them(tmp_path):
    """A job whose attempts take their peers down (here: SIGKILL to its peer as it starts)
    would go round the cluster killing one peer after the other; a supervisor restarts the
    killed peers (this test plays systemd), and it lands on the restarted one again. Each
    loss after the first two (hosts lost one after the other) counts against its restart
    strategy (here: none): the third loss fails the job; the cluster runs on."""
    from tests.e2e.procs import _running
    c = ProcessCluster(str(tmp_path), 4, {"jobmanager.executor.preload": "none",
                                          "restart-strategy.type": "none"})
    try:
        c.start()
        jid = submit(c.urls[0], {"entry": "isolation_jobs:kill_my_peer",
                                 "pyfiles": [os.path.join(ROOT, "tests", "integration") + "/"]})
        killed = []

        def supervise():
            for i in range(4):
                try:
                    pid = c.peer_pid(i)
                except (StopIteration, FileNotFoundError, ValueError):
                    continue
                if not _running(pid):
                    killed.append(i)
                    c.start_peer(i)  # (as systemd's Restart= would)
            for url in c.urls:
                try:
                    s, b = http("GET", url + f"/jobs/{jid}", timeout=2)
                except OSError:
                    continue
                if s == 200 and b["state"] in ("FAILED", "FINISHED", "CANCELED"):
                    return b
            return None
        job = poll(supervise, 240, interval=0.5, what="the job ended")
        assert job["state"] == "FAILED", job
        assert len(killed) >= 3, killed
        live = next(u for u in c.urls if http("GET", u + "/healthz", timeout=2)[0] == 200)
        s, ex = http("GET", live + f"/jobs/{jid}/exceptions")
        assert "may be what kills its peers" in ex["root-exception"], ex
        assert ex["all-exceptions"][0]["reason"] == "restart strategy is none", ex
        assert [a["end-reason"] for a in job["attempts"]] == ["peer-lost"] * 3 + ["failed"], job
        assert len(killed) == 3, killed
        for i in range(4):  # every peer back; the cluster runs jobs
            c.wait_healthy(i)
        quick = submit(live, {"entry": "jobs_fixture:quick",
                              "pyfiles": [os.path.join(ROOT, "tests", "integration") + "/"]})
        poll(lambda: http("GET", live + f"/jobs/{quick}")[1]["state"] == "FINISHED", 60,
             what="a job after it")
    finally:
        c.stop()
