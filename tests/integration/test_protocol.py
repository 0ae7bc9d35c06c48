"""Two builds side by side (raft/protocol.py) through real peers (real Raft over TCP, real
REST, real job processes): a peer that speaks protocol 1 (`cluster.protocol-version: 1`,
as a peer of the older build registers) holds the cluster at protocol 1. Tenants' quotas,
a tenant's jobs and named pipelines are refused with a 409 on every peer while other work
runs, and what older replicas drop (a submitter's name) is dropped by every replica.
Once every peer speaks protocol 2 those features work; a peer at protocol 1 can no
longer register, and its process exits saying why."""
import asyncio
import os
import sys

from jm.cluster.members.stopdrain import MARKER, StopDrainParts, drain_before_stop, end_stop_drain
from raft.protocol import PROTOCOL
from tests.conftest import InProcessCluster
from tests.helpers import ahttp, apoll, awrite
from tests.integration.test_amnesia import _peer
from tests.integration.test_cli import jm
from tests.integration.test_tenants import _state

ROOT = "root-token"
FIX = os.path.dirname(os.path.abspath(__file__)) + "/"
QUICK = {"entry": "jobs_fixture:quick", "pyfiles": [FIX]}
ROOT_H = {"Authorization": f"Bearer {ROOT}"}


async def _restart(c, i, version=PROTOCOL):
    """Peer i started again, speaking protocol `version` (the cluster's conf says 1)."""
    await c.peers[i].stop()
    c.peers[i] = _peer(c, i, **{"cluster.protocol-version": version})
    await c.peers[i].start()


async def _protocol(c, want):
    async def at():
        for i in range(len(c.peers)):
            s, b = await ahttp("GET", c.url(i) + "/overview", headers=ROOT_H)
            if s != 200 or b.get("protocol") != want:
                return False
        return True
    await apoll(at, 30, what=f"every peer sees protocol {want}")


async def _finished(c, headers, **extra):
    s, b = await awrite("POST", c.url(1) + "/jobs", {**QUICK, **extra}, headers=headers)
    assert s == 202, b
    return await _state(c, 0, b["jobid"], ROOT_H, "FINISHED")


async def test_a_peer_of_an_older_protocol_holds_features_back_until_it_is_upgraded(tmp_path):
    c = InProcessCluster(str(tmp_path), 2, {"rest.auth.token": ROOT,
                                            "rebalance.strategy": "none",
                                            "cluster.protocol-version": 1})
    await c.start()
    try:
        s, b = await awrite("POST", c.url(0) + "/tokens", {"name": "a-sub", "role": "submit",
                                                           "tenant": "a"}, headers=ROOT_H)
        assert s == 201, b
        tenant_h = {"Authorization": f"Bearer {b['token']}"}
        s, b = await awrite("POST", c.url(0) + "/tokens", {"name": "ops", "role": "admin"},
                            headers=ROOT_H)
        ops_h = {"Authorization": f"Bearer {b['token']}"}
        # peer 0 upgraded, peer 1 still speaks protocol 1: the cluster runs 1
        await _restart(c, 0)
        await apoll(lambda: c.peers[0].parts.registered.is_set(), 30, what="peer 0 registered")
        await _protocol(c, 1)
        want = {c.peers[0].node: PROTOCOL, c.peers[1].node: 1}

        async def each_peer_s():
            s, nodes = await ahttp("GET", c.url(1) + "/nodes", headers=ROOT_H)
            return {n["id"]: n["protocol"] for n in nodes["nodes"]} == want
        await apoll(each_peer_s, 30, what=f"GET /nodes shows {want}")
        rc, out, err = await jm("-a", c.url(0), "cluster", env={"JM_TOKEN": ROOT})
        assert rc == 0 and f"protocol: 1 (held back by {c.peers[1].node}" in out, (out, err)
        for i in range(2):  # refused on every peer, with the reason, nothing applied
            for method, path, body, h in (
                    ("PUT", "/tenants/a", {"slots": 1}, ROOT_H),
                    ("PUT", "/pipelines/p", {**QUICK, "job-type": "streaming"}, ROOT_H),
                    ("POST", "/jobs", QUICK, tenant_h)):
                s, b = await awrite(method, c.url(i) + path, body, headers=h)
                assert s == 409 and "every peer must speak protocol 2" in b["errors"][0] \
                    and "protocol 1" in b["errors"][0], (i, path, s, b)
        s, b = await ahttp("GET", c.url(0) + "/tenants", headers=ROOT_H)
        assert s == 200 and b["tenants"] == [], b
        # other work runs; the submitter's name, which protocol 1 does not keep, is kept
        # by no replica
        job = await _finished(c, ops_h)
        assert job["submitter"] in ("", None), job
        for p in c.peers:
            with p.parts.raft.read() as st:
                assert st.jobs[job["jid"]].submitter == ""
        await _stop_drain_ends_at_the_next_start(c, 0)
        # peer 1 upgraded too: protocol 2, and the features work
        await _restart(c, 1)
        await _protocol(c, PROTOCOL)
        s, b = await awrite("PUT", c.url(1) + "/tenants/a", {"slots": 1}, headers=ROOT_H)
        assert s == 200, b
        job = await _finished(c, tenant_h)
        assert (job["tenant"], job["submitter"]) == ("a", "a-sub"), job
        await _older_peer_is_refused(c)
    finally:
        await c.stop()


async def _stop_drain_ends_at_the_next_start(c, i):
    """Peer i stopped as SIGTERM stops it (it drains first) while the cluster runs
    protocol 1, which records that drain as an operator's: started again, it ends the
    drain its marker names, and takes work again."""
    peer = c.peers[i]

    def parts(p):
        return StopDrainParts(p.parts.raft, p.node, p.ground.data_dir, p.parts.term.valid, 10.0)

    async def drained():  # (skipped, saying why, while a busy machine holds an election)
        return await drain_before_stop(parts(peer), 60.0, 5.0, asyncio.Event()) == "drained"
    await apoll(drained, 60, what=f"{peer.node} drained for its stop")
    with peer.parts.raft.read() as st:
        me = st.peers[peer.node]
        assert me.draining and not me.drain_by_stop and me.drain_deadline == 60.0
    assert os.path.exists(os.path.join(peer.ground.data_dir, MARKER))
    await _restart(c, i)
    back = c.peers[i]
    await asyncio.wait_for(
        end_stop_drain(parts(back), back.parts.registered, back.ground.removed), 60)

    def undrained():
        for p in c.peers:
            with p.parts.raft.read() as st:
                if st.peers[peer.node].draining:
                    return False
        return True
    await apoll(undrained, 30, what=f"{peer.node} undrained on every replica")
    assert not os.path.exists(os.path.join(peer.ground.data_dir, MARKER))


async def _older_peer_is_refused(c):
    """Once the cluster runs protocol 2, a peer that speaks 1 is refused: in process, its
    lease says why; as a process, it exits 2 with that line."""
    await _restart(c, 1, version=1)
    peer = c.peers[1]
    await apoll(lambda: peer.parts.lease.refused.is_set(), 30, what="the registration refused")
    assert (f"this peer speaks protocol 1 and the cluster runs protocol {PROTOCOL}"
            in peer.parts.lease.refusal)
    assert not peer.parts.registered.is_set()
    await _protocol(c, PROTOCOL)
    await peer.stop()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jm.peer", "--conf-dir", c.conf_dir,
        "--peer", c.lines[1], "-D", "cluster.protocol-version=1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 90)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    last = (err.decode().strip().splitlines() or [""])[-1]
    assert proc.returncode == 2 and last.startswith("jobmanager: cannot start: this peer "
                                                    "speaks protocol 1"), (
        proc.returncode, out.decode()[-3000:], err.decode()[-2000:])
    await _restart(c, 1)  # (stop() of the cluster stops this one)
