"""Read what anyone acknowledged, on any peer: X-JM-Index / X-JM-Min-Index and the barrier
behind artifact checks, through real peers (real Raft, REST, job processes)."""
import os
import threading

import aiohttp

from tests.conftest import InProcessCluster
from tests.helpers import ahttp, apoll, multipart

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"


async def call(method, url, body=None, raw=None, headers=None):
    """-> (status, body, X-JM-Index)"""
    s, b, h = await ahttp(method, url, body, headers, raw, timeout=20, with_headers=True)
    return s, b, int(h["X-JM-Index"])


async def upload(url, name, content, headers=None):
    raw, ctype = multipart(name, content)
    s, b, idx = await call("POST", url + "/artifacts", raw=raw,
                           headers={"Content-Type": ctype, **(headers or {})})
    assert s == 201, b
    return b, idx


async def test_upload_on_one_peer_submit_and_read_on_others(tmp_path):
    c = InProcessCluster(str(tmp_path), 3, {"rest.write-timeout": "3 s"})
    try:
        await c.start()
        seen = 0
        for i in range(12):
            art, idx = await upload(c.url(i % 3), f"job{i}.py",
                                    b"def main(ctx):\n    return %d\n" % i)
            assert idx > seen  # the write moved the index on
            seen = idx
            # the next request goes to another peer, carrying the index: never a 400
            s, b, idx = await call("POST", c.url((i + 1) % 3) + "/jobs",
                                   {"entry": f"job{i}:main", "pyfiles": [art["pyfile"]]},
                                   headers={"X-JM-Min-Index": str(seen)})
            assert s == 202, b
            seen = max(seen, idx)
            # ... and the third peer shows the job that was acknowledged: never a 404
            s, j, idx = await call("GET", c.url((i + 2) % 3) + f"/jobs/{b['jobid']}",
                                   headers={"X-JM-Min-Index": str(seen)})
            assert s == 200 and j["jid"] == b["jobid"], j
            assert idx >= seen
    finally:
        await c.stop()


async def test_unknown_artifact_is_checked_against_the_log_before_400(tmp_path):
    """A client that sends no index (a later CLI call, curl) still never gets a spurious
    400: a peer that does not know an artifact goes through one barrier first."""
    c = InProcessCluster(str(tmp_path), 3)
    try:
        await c.start()
        for i in range(10):
            art, _ = await upload(c.url(0), f"late{i}.py", b"def main(ctx):\n    return 1\n")
            s, b, _ = await call("POST", c.url(1 + i % 2) + "/jobs",
                                 {"entry": f"late{i}:main", "pyfiles": [art["pyfile"]]})
            assert s == 202, b
        # an artifact nobody uploaded is still a 400 that names it, after the barrier
        bogus = "artifact:sha256:" + "0" * 64
        s, b, _ = await call("POST", c.url(2) + "/jobs",
                             {"entry": "x:main", "pyfiles": [bogus]})
        assert s == 400 and bogus in b["errors"][0]
    finally:
        await c.stop()


async def test_index_from_the_future_is_503_and_garbage_is_400(tmp_path):
    c = InProcessCluster(str(tmp_path), 2, {"rest.write-timeout": "500 ms"})
    try:
        await c.start()
        s, b, idx = await call("GET", c.url(0) + "/overview")
        async with aiohttp.ClientSession() as session:
            async with session.get(c.url(1) + "/overview",
                                   headers={"X-JM-Min-Index": str(idx + 10 ** 6)}) as resp:
                assert resp.status == 503 and resp.headers["Retry-After"] == "1"
                assert "not yet" in (await resp.json())["errors"][0]
        s, b, _ = await call("GET", c.url(1) + "/jobs", headers={"X-JM-Min-Index": "x"})
        assert s == 400 and "X-JM-Min-Index" in b["errors"][0]
        # the peer is none the worse for it
        await apoll(lambda: c.peers[1].parts.raft.applied_index() >= idx, 10, what="applied")
        s, b, _ = await call("GET", c.url(1) + "/overview",
                             headers={"X-JM-Min-Index": str(idx)})
        assert s == 200
    finally:
        await c.stop()


async def test_a_log_is_fetched_from_its_peer_once_that_peer_has_applied_the_attempt(tmp_path):
    """The peer asked for a log fetches it from the attempt's peer with the index it has
    applied: a peer that lags answers once it has applied the attempt (503 + Retry-After
    until then), never a 404 for a job it has not heard of yet."""
    c = InProcessCluster(str(tmp_path), 3, {"rest.write-timeout": "1 s"})
    gate = threading.Event()
    try:
        await c.start()
        await apoll(lambda: c.peers[0].parts.raft.leader(), 10, what="a leader")
        leader = c.peers[0].parts.raft.leader()
        lagging = next(p for p in c.peers if p.node != leader)
        asker = next(i for i, p in enumerate(c.peers) if p is not lagging)
        # the other peers take no new work: the job goes to the lagging peer (not by luck)
        for p in c.peers:
            if p is not lagging:
                s, b, _ = await call("POST", c.url(asker) + f"/nodes/{p.node}/drain")
                assert s == 202 and b["state"] == "DRAINED", b
        # the lagging peer's Raft thread stops after its next apply
        lagging.parts.raft.apply_hooks.append(lambda command, result: gate.wait(30))
        s, b, _ = await call("POST", c.url(asker) + "/jobs",
                             {"entry": "jobs_fixture:quick", "pyfiles": [FIX]})
        assert s == 202, b
        jid = b["jobid"]

        def placed():
            with c.peers[asker].parts.raft.read() as st:
                job = st.jobs[jid]
                return job.attempts and job.attempts[-1].node
        assert await apoll(placed, 10, what="placed") == lagging.node
        async with aiohttp.ClientSession() as session:
            async with session.get(c.url(asker) + f"/jobs/{jid}/logs") as resp:
                body = await resp.json()
                assert resp.status == 503, body
                assert resp.headers["Retry-After"] == "1" and "not yet" in body["errors"][0]
        gate.set()
        s, b, _ = await call("GET", c.url(asker) + f"/jobs/{jid}/logs")
        assert s == 200 and b["node"] == lagging.node and b["attempt"] == 1, b
    finally:
        gate.set()
        await c.stop()
