"""A leader cut off from the others by a real network partition (one network namespace
per peer): it steps down and stops its job processes within its lease; the majority
elects a new leader and runs the isolated peer's jobs; after healing, the old leader
rejoins with no jobs and no job ever ran twice at the same time."""
import json
import os
import subprocess
import sys
import time

import pytest

from chaos import checks
from chaos.__main__ import read_probes
from chaos.harness import ChaosCluster, Scenario, auth_headers, call
from chaos.netns import available
from tests.helpers import ROOT, poll

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not available(), reason="needs root and ip netns")]


def get_inside(c: ChaosCluster, i: int, path: str) -> dict:
    """GET from inside peer i's namespace (reachable even while it is partitioned)."""
    code = ("import json,urllib.request;print(urllib.request.urlopen(urllib.request.Request("
            f"'{c.urls[i]}{path}',headers={auth_headers(c.urls[i])!r}),timeout=2).read().decode())")
    r = subprocess.run([*c.net.exec_prefix(i), sys.executable, "-c", code],
                       capture_output=True, text=True, timeout=10)
    return json.loads(r.stdout)


def test_partitioned_leader_steps_down_and_is_fenced(tmp_path):
    c = ChaosCluster(Scenario(jobs=6, faults=("partition",),
                              settings={"restart-strategy.type": "none"}), str(tmp_path))
    try:
        c.start()
        for k in range(6):
            s, b = call("POST", c.urls[k % 3] + "/jobs",
                        {"entry": "probe:main", "pyfiles": [os.path.join(ROOT, "chaos") + "/"],
                         "args": {"dir": c.probe_dir}})
            assert s == 202, b
        poll(lambda: all(r["state"] == "RUNNING" for r in
                         call("GET", c.urls[0] + "/jobs/overview")[1]["jobs"]), 60)
        li = c.leader_index()
        leader = c.nodes[li]
        mine = c.jobs_of(li)
        assert mine, "the leader runs jobs too"
        others = [u for k, u in enumerate(c.urls) if k != li]
        t_cut = time.time()
        c.net.partition(li)
        # the isolated leader steps down: it knows no leader (so it accepts no write)
        poll(lambda: get_inside(c, li, "/overview")["leader"] is None, 5, interval=0.1,
             what="isolated leader steps down")
        stepped_down = time.time() - t_cut
        assert stepped_down < 3.5, stepped_down  # ~ leader fallback (1.4 s) .. lease (2 s)
        # the majority elects another leader and runs the isolated peer's jobs
        poll(lambda: call("GET", others[0] + "/overview")[1]["leader"] not in (None, leader),
             10, what="new leader")
        poll(lambda: all(r["node"] != leader and r["state"] == "RUNNING" for r in
                         call("GET", others[1] + "/jobs/overview")[1]["jobs"]
                         if r["jid"] in mine), 20, what="jobs moved to the majority")
        c.net.heal(li)
        poll(lambda: any(n["id"] == leader and n["state"] == "ALIVE" and not n["jobs"]
                         for n in call("GET", others[0] + "/nodes")[1]["nodes"]), 30,
             what="old leader back, empty")
    finally:
        c.stop()
    probes = read_probes(c.probe_dir)
    assert checks.check_single_attempt(probes) == []
    lease = 2.0
    for job in mine:
        late = [t for _, node, t in probes[job] if node == leader and t > t_cut + lease + 0.3]
        assert not late, f"{job} ran on the isolated leader past its lease"
