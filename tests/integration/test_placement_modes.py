"""jobmanager.placement through real peers: leader-only keeps every JobMaster on the
leader (Flink's classic session mode, for comparison); pack fills one peer first."""
import os

from tests.conftest import InProcessCluster
from tests.helpers import ahttp, apoll, asubmit

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"


async def _run_jobs(c, n):
    ids = []
    for i in range(n):  # (as a client does: a 503 while a busy machine elects, sent again)
        ids.append(await asubmit(c.url(i % 3), {"entry": "jobs_fixture:sleepy",
                                                "pyfiles": [FIX], "args": {"seconds": 30}}))

    async def running():
        s, b = await ahttp("GET", c.url(0) + "/jobs/overview")
        rows = [r for r in b["jobs"] if r["jid"] in ids]
        return rows if all(r["state"] == "RUNNING" for r in rows) else None
    return await apoll(running, 30, what="jobs running")


async def test_leader_only_runs_everything_on_the_leader(tmp_path):
    c = InProcessCluster(str(tmp_path), 3, {"jobmanager.placement": "leader-only"})
    try:
        await c.start()
        rows = await _run_jobs(c, 6)
        s, ov = await ahttp("GET", c.url(1) + "/overview")
        assert {r["node"] for r in rows} == {ov["leader"]}
    finally:
        await c.stop()


async def test_pack_fills_one_peer_first(tmp_path):
    c = InProcessCluster(str(tmp_path), 3, {"jobmanager.placement": "pack",
                                            "jobmanager.slots": 4})
    try:
        await c.start()
        rows = await _run_jobs(c, 4)
        assert len({r["node"] for r in rows}) == 1
    finally:
        await c.stop()
