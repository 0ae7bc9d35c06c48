"""Savepoints, stop-with-savepoint, resume, drain and rebalancing through real peers
(real Raft, REST and job processes; the jobs are Spark-free `ticker` pipelines)."""
import os

from tests.conftest import InProcessCluster
from tests.helpers import ahttp, apoll, asubmit_to

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"


def ticker_spec(out, **extra):
    spec = {"entry": "jobs_fixture:ticker", "pyfiles": [FIX], "job-type": "streaming",
            "args": {"output": str(out)}}
    spec.update(extra)
    return spec


async def job(c, jid, peer=0):
    s, b = await ahttp("GET", c.url(peer) + f"/jobs/{jid}")
    assert s == 200, b
    return b


async def wait_state(c, jid, state, peer=0, timeout=30):
    async def check():
        j = await job(c, jid, peer)
        return j if j["state"] == state else None
    return await apoll(check, timeout, what=f"{jid} {state}")


async def wait_batches(out, n, timeout=30):
    return await apoll(lambda: len(os.listdir(out)) >= n, timeout, what=f"{n} batches in {out}")


def batches(out):
    """{batch: attempt} of the sink; asserts that attempts never interleave."""
    rows = {}
    for name in os.listdir(out):
        if name.isdigit():
            with open(os.path.join(out, name)) as f:
                rows[int(name)] = int(f.read().split()[1])
    order = [rows[b] for b in sorted(rows)]
    assert order == sorted(order), f"attempts interleaved: {order}"
    assert sorted(rows) == list(range(len(rows))), "a batch is missing"
    return rows


async def wait_savepoint(c, jid, rid, peer=0, timeout=30):
    async def check():
        s, b = await ahttp("GET", c.url(peer) + f"/jobs/{jid}/savepoints/{rid}")
        assert s == 200, b
        return b if b["status"]["id"] == "COMPLETED" else None
    return await apoll(check, timeout, what=f"savepoint {rid}")


async def resume_from(c, out, location, stopped):
    """A new job resumed from the savepoint at `location` of the job `stopped` (ended by
    stop-with-savepoint) continues after its last committed batch: none lost, none
    written twice. Returns the new job's id (canceled again)."""
    upto = max(batches(out))
    assert stopped["result"]["next"] == upto + 1
    jid2 = await asubmit_to(c, ticker_spec(out, **{"savepoint-path": location}), peer=1)
    j2 = await wait_state(c, jid2, "RUNNING")
    await wait_batches(out, upto + 4)
    s, b = await ahttp("PATCH", c.url(0) + f"/jobs/{jid2}?mode=cancel")
    assert s == 202
    await wait_state(c, jid2, "CANCELED")
    rows = batches(out)
    assert rows[upto] == stopped["attempt"] and rows[upto + 1] == j2["attempt"]
    return jid2


async def test_savepoint_stop_and_resume(tmp_path):
    out = tmp_path / "out"
    c = InProcessCluster(str(tmp_path), 3, {"rebalance.strategy": "none"})
    try:
        await c.start()
        jid = await asubmit_to(c, ticker_spec(out))
        await wait_state(c, jid, "RUNNING")
        await wait_batches(out, 3)
        # a savepoint while it runs, requested on another peer, safe to retry
        body = {"triggerId": "sp-1", "target-directory": str(tmp_path / "mine")}
        s, b = await ahttp("POST", c.url(1) + f"/jobs/{jid}/savepoints", body)
        assert (s, b) == (202, {"request-id": "sp-1"})
        s, b = await ahttp("POST", c.url(2) + f"/jobs/{jid}/savepoints", body)
        assert (s, b) == (202, {"request-id": "sp-1"})
        sp = await wait_savepoint(c, jid, "sp-1", peer=2)
        loc = sp["operation"]["location"]
        assert loc.startswith(str(tmp_path / "mine") + "/savepoint-")
        with open(os.path.join(loc, "_metadata")) as f:
            assert '"ticks"' in f.read()
        assert (await job(c, jid))["state"] == "RUNNING"
        # stop-with-savepoint through a peer that may not own it
        s, b = await ahttp("POST", c.url(2) + f"/jobs/{jid}/stop", {})
        assert s == 202, b
        sp = await wait_savepoint(c, jid, b["request-id"], peer=1)
        stop_loc = sp["operation"]["location"]
        assert stop_loc.startswith(str(tmp_path / "ha" / "savepoints"))
        j = await wait_state(c, jid, "FINISHED")
        assert j["savepoint"] == stop_loc and j["attempts"][-1]["end-reason"] == "stopped"
        await resume_from(c, out, stop_loc, j)
        s, b = await ahttp("GET", c.url(0) + f"/jobs/{jid}/savepoints")
        assert [x["request-id"] for x in b["savepoints"]][-1] == "sp-1"
    finally:
        await c.stop()


async def test_savepoint_errors(tmp_path):
    c = InProcessCluster(str(tmp_path), 3, {"rebalance.strategy": "none"})
    try:
        await c.start()
        u = c.url(0)
        s, b = await ahttp("POST", u + "/jobs", {"entry": "jobs_fixture:wait_for_stop",
                                                 "pyfiles": [FIX]})
        batch = b["jobid"]
        s, b = await ahttp("POST", u + f"/jobs/{batch}/savepoints")
        assert s == 409 and "streaming" in b["errors"][0]
        s, b = await ahttp("POST", u + f"/jobs/{batch}/stop")
        assert s == 409
        s, b = await ahttp("POST", u + "/jobs/nope/savepoints")
        assert s == 404 and b["errors"]
        s, b = await ahttp("GET", u + f"/jobs/{batch}/savepoints/nope")
        assert s == 404 and "no savepoint request" in b["errors"][0]
        for bad in ({"triggerId": "a b"}, {"target-directory": "rel"}, {"cancel-job": "yes"},
                    [1]):
            s, b = await ahttp("POST", u + f"/jobs/{batch}/savepoints", bad)
            assert s == 400 and b["errors"], bad
        s, b = await ahttp("POST", u + f"/jobs/{batch}/stop", {"drain": True})
        assert s == 400
        s, b = await ahttp("POST", u + "/jobs", ticker_spec(
            tmp_path / "o", **{"savepoint-path": str(tmp_path / "no-such-savepoint")}))
        assert s == 400 and "not a savepoint" in b["errors"][0]
        s, b = await ahttp("POST", u + "/nodes/nope:1/drain")
        assert s == 404
        await ahttp("PATCH", u + f"/jobs/{batch}?mode=cancel")
    finally:
        await c.stop()


async def test_stop_kills_a_job_that_ignores_it(tmp_path):
    c = InProcessCluster(str(tmp_path), 3, {"rebalance.strategy": "none",
                                            "jobmanager.cancel-timeout": "500 ms"})
    try:
        await c.start()
        jid = await asubmit_to(c, {"entry": "jobs_fixture:stubborn", "pyfiles": [FIX],
                               "job-type": "streaming"})
        await wait_state(c, jid, "RUNNING")
        s, b = await ahttp("POST", c.url(0) + f"/jobs/{jid}/stop")
        sp = await wait_savepoint(c, jid, b["request-id"])
        assert "location" in sp["operation"]
        await wait_state(c, jid, "FINISHED")
    finally:
        await c.stop()


async def nodes(c, peer=0):
    s, b = await ahttp("GET", c.url(peer) + "/nodes")
    return {n["id"]: n for n in b["nodes"]}


async def test_drain_moves_streaming_jobs_and_keeps_batch_jobs(tmp_path):
    c = InProcessCluster(str(tmp_path), 3, {"rebalance.strategy": "none",
                                            "rebalance.max-moves-per-round": 2})
    try:
        await c.start()
        outs = [tmp_path / f"out{i}" for i in range(6)]
        ids = [await asubmit_to(c, ticker_spec(o), peer=i % 3) for i, o in enumerate(outs)]
        for jid in ids:
            await wait_state(c, jid, "RUNNING")
        n = await nodes(c)
        victim = max(n, key=lambda k: len(n[k]["jobs"]))
        s, b = await ahttp("POST", c.url(0) + "/jobs", {
            "entry": "jobs_fixture:wait_for_stop", "pyfiles": [FIX]})
        batch = b["jobid"]
        await wait_state(c, batch, "RUNNING")
        # the batch job may be anywhere: drain its peer so it has to stay
        victim = (await job(c, batch))["node"]
        on_victim = [j for j in (await nodes(c))[victim]["jobs"] if j != batch]
        s, b = await ahttp("POST", c.url(1) + f"/nodes/{victim}/drain")
        assert s == 202 and b["state"] == "DRAINING", b

        async def drained_but_batch():
            n = await nodes(c)
            return n[victim]["jobs"] == [batch] and n[victim]["state"] == "DRAINING"
        await apoll(drained_but_batch, 60, what="streaming jobs moved off the drained peer")
        for jid in on_victim:
            j = await wait_state(c, jid, "RUNNING")
            assert j["node"] != victim and j["attempts"][-2]["end-reason"] == "moved"
        # new work never lands on it
        extra = await asubmit_to(c, ticker_spec(tmp_path / "extra"))
        assert (await wait_state(c, extra, "RUNNING"))["node"] != victim
        # the batch job finishes where it is; then the peer is DRAINED
        await ahttp("PATCH", c.url(0) + f"/jobs/{batch}?mode=cancel")
        await apoll(lambda: _state_is(c, victim, "DRAINED"), 30, what="DRAINED")
        s, b = await ahttp("DELETE", c.url(2) + f"/nodes/{victim}/drain")
        assert s == 200 and b["state"] == "ALIVE"
        for o in outs:
            await wait_batches(o, 3)
            batches(o)  # nothing lost, attempts never overlapped
    finally:
        await c.stop()


async def _state_is(c, node, state, peer=0):
    return (await nodes(c, peer))[node]["state"] == state


async def test_manual_rebalance(tmp_path):
    c = InProcessCluster(str(tmp_path), 3, {"rebalance.strategy": "none",
                                            "rebalance.max-moves-per-round": 4})
    try:
        await c.start()
        victim = c.peers[2].node
        await ahttp("POST", c.url(0) + f"/nodes/{victim}/drain")
        outs = [tmp_path / f"out{i}" for i in range(6)]
        ids = [await asubmit_to(c, ticker_spec(o)) for o in outs]
        for jid in ids:
            await wait_state(c, jid, "RUNNING")
        await ahttp("DELETE", c.url(0) + f"/nodes/{victim}/drain")
        assert (await nodes(c))[victim]["jobs"] == []  # strategy none: nothing moves by itself
        # the round is planned from peer 1's replica: let it apply the end of the drain
        await apoll(lambda: _state_is(c, victim, "ALIVE", peer=1), 10, what="undrained on 1")
        s, b = await ahttp("POST", c.url(1) + "/cluster/rebalance")
        assert s == 200 and len(b["moves"]) == 2 and b["refused"] == [], b
        assert all(m["to"] == victim for m in b["moves"])

        async def balanced():
            n = await nodes(c)
            states = [(await job(c, j))["state"] for j in ids]
            return sorted(len(x["jobs"]) for x in n.values()) == [2, 2, 2] and \
                states == ["RUNNING"] * len(ids)
        await apoll(balanced, 60, what="2 jobs per peer")
        s, b = await ahttp("POST", c.url(1) + "/cluster/rebalance")
        assert b == {"moves": [], "refused": []}
        for o in outs:  # RUNNING is reported before the job writes: wait for its output
            await wait_batches(o, 2)
            batches(o)
    finally:
        await c.stop()


async def test_on_join_rebalance_after_undrain(tmp_path):
    """With rebalance.strategy on-join, a peer that becomes available again gets its share."""
    c = InProcessCluster(str(tmp_path), 3, {"rebalance.strategy": "on-join",
                                            "rebalance.interval": "500 ms"})
    try:
        await c.start()
        victim = c.peers[1].node
        await ahttp("POST", c.url(0) + f"/nodes/{victim}/drain")
        outs = [tmp_path / f"out{i}" for i in range(4)]
        ids = [await asubmit_to(c, ticker_spec(o)) for o in outs]
        for jid in ids:
            await wait_state(c, jid, "RUNNING")
        assert (await nodes(c))[victim]["jobs"] == []
        await ahttp("DELETE", c.url(2) + f"/nodes/{victim}/drain")

        async def spread_ok():
            counts = [len(x["jobs"]) for x in (await nodes(c)).values()]
            return max(counts) - min(counts) <= 1 and (await nodes(c))[victim]["jobs"]
        await apoll(spread_ok, 60, what="on-join rebalance")
        for jid in ids:
            await wait_state(c, jid, "RUNNING")
        for o in outs:  # RUNNING is reported before the job writes: wait for its output
            await wait_batches(o, 2)
            batches(o)
    finally:
        await c.stop()
