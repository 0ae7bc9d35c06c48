"""Membership changes through real peers in one process (real Raft, REST and job
processes): add a member that never starts, remove it again, drain with a deadline, and
remove the leader itself while it runs a batch job. The process-level test (peers that
join through conf/masters and stop themselves) is tests/e2e/test_membership.py."""
import os

from tests.conftest import running
from tests.helpers import ahttp, apoll

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"
SLEEPY = {"entry": "jobs_fixture:sleepy", "pyfiles": [FIX], "args": {"seconds": 600}}


async def members(c, peer=0):
    s, b = await ahttp("GET", c.url(peer) + "/cluster/peers")
    assert s == 200, b
    return sorted(m["id"] for m in b["members"])


async def job(c, jid, peer=0):
    return (await ahttp("GET", c.url(peer) + f"/jobs/{jid}"))[1]


async def leader_index(c):
    s, b = await ahttp("GET", c.url(0) + "/overview")
    return next(i for i, p in enumerate(c.peers) if p.node == b["leader"])


async def non_voters(c, peer=0):
    s, b = await ahttp("GET", c.url(peer) + "/cluster/peers")
    assert s == 200, b
    return {n["id"]: n["state"] for n in b["non-voters"]}


async def test_add_and_remove_a_member_that_never_starts(tmp_path):
    async with running(str(tmp_path), 3, {"rebalance.strategy": "none"}) as c:
        before = await members(c)
        # the voting core (raft.voters, 3) is full: a new member joins as a non-voter
        s, b = await ahttp("POST", c.url(1) + "/cluster/peers", {"peer": "127.0.0.1:1:2"})
        assert s == 201, b
        assert b["id"] == "127.0.0.1:2" and b["role"] == "non-voter", b
        for i in range(3):
            assert await members(c, i) == before
            assert await non_voters(c, i) == {"127.0.0.1:2": "JOINING"}
        s, b = await ahttp("GET", c.url(2) + "/nodes")
        joining = [n for n in b["nodes"] if n["id"] == "127.0.0.1:2"]
        assert joining and joining[0]["state"] == "JOINING" and joining[0]["rest-port"] == 1
        assert joining[0]["raft-role"] == "non-voter"
        # bad input: clear errors, nothing changes
        for body, status in (({"peer": "nonsense"}, 400), ({}, 400),
                             ({"peer": "127.0.0.1:1:2"}, 409),
                             ({"peer": c.lines[0]}, 409)):
            s, b = await ahttp("POST", c.url(0) + "/cluster/peers", body)
            assert s == status and b["errors"], (body, s, b)
        s, b = await ahttp("DELETE", c.url(0) + "/cluster/peers/127.0.0.1:9")
        assert s == 404 and b["errors"]
        s, b = await ahttp("DELETE", c.url(0) + "/cluster/peers/x?deadline=soon")
        assert s == 400 and b["errors"]
        s, b = await ahttp("DELETE", c.url(0) + "/cluster/peers/127.0.0.1:1:2")
        assert s == 202 and b["state"] == "REMOVED", b
        assert await non_voters(c) == {}


async def test_a_voter_removed_is_replaced_by_promoting_a_non_voter(tmp_path):
    """Four peers, three voters: the fourth is a non-voting member. Promotion by hand is
    refused while the core is full; a voter removed, the leader promotes the non-voter
    in place (its REST never stops), and the core of three is whole again."""
    async with running(str(tmp_path), 4, {"rebalance.strategy": "none"}) as c:
        reader = c.peers[3].node
        assert reader not in await members(c)
        s, b = await ahttp("POST", c.url(0) + f"/cluster/peers/{reader}/promote")
        assert s == 409 and "core is full" in b["errors"][0], b
        for node, status in ((c.peers[0].node, 409), ("127.0.0.1:9", 404)):
            s, b = await ahttp("POST", c.url(0) + f"/cluster/peers/{node}/promote")
            assert s == status and b["errors"], (node, s, b)
        # the peers' own endpoint: a bad body, and a voter asked to become one
        for body, status in (({}, 400), ({"voters": "x"}, 400),
                             ({"voters": [c.peers[1].node]}, 409)):
            s, b = await ahttp("POST", c.url(0) + "/cluster/voter", body)
            assert s == status and b["errors"], (body, s, b)
        li = await leader_index(c)
        out = next(i for i in range(3) if i != li)
        s, b = await ahttp("DELETE", c.url(li) + f"/cluster/peers/{c.peers[out].node}")
        assert s == 202, b
        rest = sorted([p.node for i, p in enumerate(c.peers) if i != out])
        await apoll(lambda: _members_now(c, li, rest), 60, what="the non-voter promoted")
        await apoll(lambda: c.peers[3].parts.raft.membership.voting(), 30, what="it votes")
        assert await non_voters(c, li) == {}
        s, b = await ahttp("POST", c.url(3) + "/jobs", {"entry": "jobs_fixture:quick",
                                                        "pyfiles": [FIX]})
        assert s == 202, b
        jid = b["jobid"]
        await apoll(lambda: _state(c, jid, "FINISHED", li), 30, what="a job afterwards")


async def _members_are(c, expected):
    return all([await members(c, i) == expected for i in range(3)])


async def test_drain_deadline_restarts_batch_jobs_elsewhere(tmp_path):
    async with running(str(tmp_path), 2, {"rebalance.strategy": "none"}) as c:
        s, b = await ahttp("POST", c.url(0) + "/jobs", SLEEPY)
        jid = b["jobid"]
        await apoll(lambda: _state(c, jid, "RUNNING"), 30, what="running")
        first = await job(c, jid)
        s, b = await ahttp("POST", c.url(0) + f"/nodes/{first['node']}/drain",
                           {"deadline": 0.5})
        assert s == 202 and b["state"] == "DRAINING", b
        await apoll(lambda: _moved(c, jid, first["node"]), 30, what="restarted elsewhere")
        j = await job(c, jid)
        assert j["attempt"] == first["attempt"] + 1 and j["restarts"] == first["restarts"]
        assert j["attempts"][0]["end-reason"] == "moved"
        s, b = await ahttp("GET", c.url(1) + "/nodes")
        drained = [n for n in b["nodes"] if n["id"] == first["node"]][0]
        assert drained["state"] == "DRAINED" and drained["drain-deadline"] == 0.5


async def _state(c, jid, state, peer=0):
    return (await job(c, jid, peer))["state"] == state


async def _moved(c, jid, old):
    j = await job(c, jid)
    return j["state"] == "RUNNING" and j["node"] not in (None, old)


async def test_remove_the_leader_while_it_runs_a_batch_job(tmp_path):
    async with running(str(tmp_path), 3, {"rebalance.strategy": "none",
                                          "jobmanager.slots": 4}) as c:
        li = await leader_index(c)
        leader = c.peers[li].node
        # occupy the other peers' slots first, so that one job lands on the leader
        jids = []
        while True:
            s, b = await ahttp("POST", c.url(0) + "/jobs", SLEEPY)
            jids.append(b["jobid"])
            await apoll(lambda: _state(c, jids[-1], "RUNNING"), 30, what="running")
            if (await job(c, jids[-1]))["node"] == leader:
                break
            assert len(jids) < 9
        other = (li + 1) % 3
        s, b = await ahttp("DELETE", c.url(other) + f"/cluster/peers/{leader}?deadline=0")
        assert s == 202 and b["state"] == "LEAVING", b
        rest = sorted(p.node for p in c.peers if p.node != leader)
        await apoll(lambda: _members_now(c, other, rest), 60, what="the leader removed")
        await apoll(lambda: c.peers[li].ground.removed.is_set(), 30, what="it knows it was removed")
        for jid in jids:  # the removed leader's job starts again elsewhere (the others fit)
            j = await job(c, jid, other)
            assert j["node"] != leader, j

            async def running_elsewhere(jid=jid):
                j = await job(c, jid, other)
                return j["state"] == "RUNNING" and j["node"] not in (None, leader)
            await apoll(running_elsewhere, 30, what=f"{jid} running on a remaining peer")
        s, b = await ahttp("GET", c.url(other) + "/overview")
        assert b["leader"] in rest


async def _members_now(c, i, expected):
    try:
        return await members(c, i) == expected
    except AssertionError:  # 503 while the leadership moves
        return False


async def test_a_peer_of_another_cluster_saying_not_a_member_moves_no_data(tmp_path):
    """A member sets its Raft data aside only on a removal committed in its own cluster:
    a wrong conf/masters that points at another cluster (which rightly says "not a
    member") leaves the data where it is, with an error saying so."""
    import glob
    import pytest
    from jm.cluster.members.identity import IDENTITY_FILE
    from jm.cluster.members.membership import has_raft_data, initial_members
    from jm.cluster.peerclient import PeerClient
    from jm.config import ConfigError
    async with running(str(tmp_path / "b"), 1) as b:
        me, raft_dir = b.masters()[0], b.peers[0].ground.raft_dir
        await apoll(lambda: os.path.exists(os.path.join(raft_dir, IDENTITY_FILE)), 30,
                    what="the identity file")
    client = PeerClient({})
    async with running(str(tmp_path / "a"), 1) as a:
        with pytest.raises(ConfigError, match="does not show that it was removed"):
            await initial_members(me, a.masters(), raft_dir, client, 3)
    await client.close()
    assert has_raft_data(raft_dir) and not glob.glob(raft_dir + ".removed-*")
