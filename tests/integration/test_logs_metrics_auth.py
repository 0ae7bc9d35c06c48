"""Job logs from any peer, Prometheus metrics, bearer-token authentication, path traversal
refused, and a peer with a wrong cluster secret cannot join (real peers in-process)."""
import asyncio
import os

from tests.conftest import InProcessCluster
from tests.helpers import ahttp, apoll, multipart

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"


async def test_logs_of_an_attempt_from_every_peer(cluster3):
    c = cluster3
    s, b = await ahttp("POST", c.url(0) + "/jobs", {"entry": "jobs_fixture:wait_for_stop",
                                                    "pyfiles": [FIX]})
    jid = b["jobid"]

    async def has_log():
        s, b = await ahttp("GET", c.url(1) + f"/jobs/{jid}/logs")
        return b if s == 200 and "waiting for stop" in b["text"] else None
    first = await apoll(has_log, 30, what="the job's log")
    assert first["attempt"] == 1 and not first["ended"]
    for i in range(3):  # the same bytes whichever peer answers (once it knows the job)
        async def same(i=i):
            s, b = await ahttp("GET", c.url(i) + f"/jobs/{jid}/logs?attempt=1")
            return s == 200 and b["text"] == first["text"] and b["node"] == first["node"]
        await apoll(same, 10, what=f"the log through peer {i}")
    s, b = await ahttp("GET", c.url(2) + f"/jobs/{jid}/logs?tail=1")
    assert b["text"] == "waiting for stop\n"
    s, b = await ahttp("GET", c.url(2) + f"/jobs/{jid}/logs?offset={first['next-offset']}")
    assert b["text"] == "" and b["offset"] == first["next-offset"]
    s, text = await ahttp("GET", c.url(1) + f"/jobs/{jid}/logs?format=text&tail=1")
    assert s == 200 and "waiting for stop" in str(text)
    for bad, code in (("attempt=0", 400), ("attempt=x", 400), ("tail=-1", 400),
                      ("attempt=9", 404), ("format=xml", 400), ("tail=1&offset=3", 400)):
        s, b = await ahttp("GET", c.url(0) + f"/jobs/{jid}/logs?{bad}")
        assert s == code and b["errors"], (bad, s, b)
    s, b = await ahttp("GET", c.url(0) + "/jobs/nope/logs")
    assert s == 404
    await ahttp("PATCH", c.url(0) + f"/jobs/{jid}?mode=cancel")


async def test_metrics_in_prometheus_format(cluster3):
    c = cluster3
    s, b = await ahttp("POST", c.url(0) + "/jobs", {"entry": "jobs_fixture:quick",
                                                    "pyfiles": [FIX]})
    jid = b["jobid"]
    for i in range(3):  # every replica has applied the end of the job
        await apoll(lambda i=i: _state(c, jid, "FINISHED", i), 30, what="job finished")
    texts = []
    for i in range(3):
        await ahttp("GET", c.url(i) + "/metrics")
        s, text = await ahttp("GET", c.url(i) + "/metrics")  # the first scrape is counted
        assert s == 200
        texts.append(str(text))
    from prometheus_client.parser import text_string_to_metric_families
    views = []  # per peer: {(sample name, frozen labels): value}
    for t, p in zip(texts, c.peers):
        assert "# TYPE jm_rest_request_duration_seconds histogram" in t
        v = {(x.name, frozenset(x.labels.items())): x.value
             for f in text_string_to_metric_families(t) for x in f.samples}
        me = frozenset({("peer", p.node)})
        assert ("jm_raft_term", me) in v and ("jm_raft_commit_index", me) in v
        assert v[("jm_rest_request_duration_seconds_count", me | {
            ("method", "GET"), ("route", "/metrics"), ("code", "200")})] >= 1
        views.append((p.node, v))
    # cluster-wide numbers come from the leader alone (a sum() over peers is right)
    leaders = [(n, v) for n, v in views if v[("jm_raft_leader", frozenset({("peer", n)}))]]
    assert len(leaders) == 1
    node, lv = leaders[0]
    assert lv[("jm_cluster_jobs", frozenset({("state", "FINISHED")}))] == 1
    assert lv[("jm_cluster_peers", frozenset({("state", "ALIVE")}))] == 3
    assert lv[("jm_placement_latency_seconds_count", frozenset({("peer", node)}))] == 1
    for n, v in views:
        if n != node:
            assert not [k for k in v if k[0].startswith("jm_cluster_")]


async def _state(c, jid, state, peer=0):
    s, b = await ahttp("GET", c.url(peer) + f"/jobs/{jid}")
    return s == 200 and b["state"] == state


async def test_token_auth_and_traversal(tmp_path):
    token, secret = "s3cret-token", "peer-secret"
    c = InProcessCluster(str(tmp_path), 2, {"rest.auth.token": token,
                                            "cluster.secret": secret})
    ok = {"Authorization": f"Bearer {token}"}
    try:
        await c.start()
        u0, u1 = c.url(0), c.url(1)
        s, b = await ahttp("GET", u0 + "/healthz")
        assert s == 200  # open, like the UI shell
        for path in ("/overview", "/jobs", "/nodes", "/metrics", "/artifacts"):
            s, b = await ahttp("GET", u0 + path)
            assert s == 401 and b["errors"], path
            s, b = await ahttp("GET", u0 + path, headers={"Authorization": "Bearer wrong"})
            assert s == 401, path
            s, b = await ahttp("GET", u0 + path, headers={"Authorization": token})
            assert s == 401, path  # not a bearer header
            s, b = await ahttp("GET", u0 + path, headers=ok)
            assert s == 200, path
        s, b = await ahttp("POST", u0 + "/jobs", {"sql": "SELECT 1"})
        assert s == 401
        # heartbeats are the peers' own: the users' token cannot keep a peer alive (the
        # peers' own heartbeats, with the credential, keep both registered meanwhile)
        beat = {"node": c.peers[1].node, "time": 1.0}
        for headers in ({}, ok):
            s, b = await ahttp("POST", u0 + "/cluster/beat", beat, headers=headers)
            assert s == 401 and "peer credential" in b["errors"][0], (headers, b)
            # nor start a peer's voting node (promotions are the peers' own too)
            s, b = await ahttp("POST", u0 + "/cluster/voter", {"voters": ["x:1"]},
                               headers=headers)
            assert s == 401 and "peer credential" in b["errors"][0], (headers, b)
        s, b = await ahttp("GET", u0 + "/nodes", headers=ok)
        assert [n["state"] for n in b["nodes"]] == ["ALIVE", "ALIVE"]
        # an artifact uploaded on one peer is fetched by the other with the cluster secret
        job_py = b"def main(ctx):\n    return 'ran'\n"
        raw, ctype = multipart("authjob.py", job_py)
        s, art = await ahttp("POST", u0 + "/artifacts", raw=raw,
                             headers={**ok, "Content-Type": ctype})
        assert s == 201, art
        s, b = await ahttp("GET", u1 + f"/artifacts/{art['id']}/content", headers=ok)
        assert s in (200, 404)  # u1 may not hold it yet; never 401 with the token
        ids = []
        for _ in range(4):  # some land on the peer without the file: it must fetch it
            s, b = await ahttp("POST", u1 + "/jobs", {"entry": "authjob:main",
                                                      "pyfiles": [art["pyfile"]]}, headers=ok)
            ids.append(b["jobid"])
        for jid in ids:
            async def done(j=jid):
                s, b = await ahttp("GET", u0 + f"/jobs/{j}", headers=ok)
                return b if b["state"] in ("FINISHED", "FAILED") else None
            j = await apoll(done, 30, what="job ended")
            assert j["state"] == "FINISHED" and j["result"] == "ran", j
        # traversal: upload names, artifact ids and log paths never leave their folders
        raw, ctype = multipart("../../evil.py", b"# other content\n")
        s, b = await ahttp("POST", u0 + "/artifacts", raw=raw,
                           headers={**ok, "Content-Type": ctype})
        assert s == 201 and b["name"] == "evil.py"
        for path in ("/artifacts/..%2f..%2fetc%2fpasswd/content",
                     "/artifacts/%2e%2e%2f%2e%2e%2fetc%2fpasswd/content",
                     "/artifacts/%2Fetc%2Fpasswd/content",
                     "/artifacts/sha256:..%2F..%2Fconf/content",
                     "/jobs/..%2F..%2Fconf/logs", "/jobs/%2e%2e/logs?attempt=1",
                     "/jobs/%2Fetc%2Fpasswd/logs"):
            s, b = await ahttp("GET", u0 + path, headers=ok)
            assert s in (400, 404), (path, s, b)
            assert "root:" not in str(b)
    finally:
        await c.stop()


async def test_a_peer_with_a_wrong_secret_cannot_join(tmp_path):
    c = InProcessCluster(str(tmp_path), 3, {"cluster.secret": "right"})
    from jm.config import load_config
    from jm.peer.peer import Peer
    try:
        # start peers 0 and 1 with the right secret, peer 2 with a wrong one
        masters = c.masters()
        good = [Peer(load_config(c.conf_dir), m, masters) for m in masters[:2]]
        bad = Peer(load_config(c.conf_dir, {"cluster.secret": "wrong"}), masters[2], masters)
        c.peers = good + [bad]
        await asyncio.gather(*(p.start() for p in c.peers))
        await apoll(lambda: all(p.parts.registered.is_set() for p in good), 30,
                    what="the two right peers registered")
        # watch the cluster for a while: the wrong peer never gets in
        for _ in range(40):
            assert not bad.parts.registered.is_set()
            with good[0].parts.raft.read() as st:
                assert bad.node not in st.peers
            await asyncio.sleep(0.1)  # observation window, not a wait for state
        s, b = await ahttp("GET", c.url(2) + "/healthz")
        assert s == 503 and b["registered"] is False
    finally:
        await c.stop()
