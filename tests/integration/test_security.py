"""Safe by default, through real peers: drive-by POSTs and DNS rebinding refused, bodies
of the wrong type refused, peers show a credential derived from cluster.secret (never the
secret), and a peer that would listen beyond loopback unprotected does not start."""
import os
import subprocess
import sys

import pytest

from jm.config import ConfigError, PeerAddress, load_config
from jm.policy.members.security import peer_credential
from tests.conftest import InProcessCluster, running
from tests.helpers import ROOT, ahttp, apoll, make_conf

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"
JOB = {"entry": "jobs_fixture:quick", "pyfiles": [FIX]}


async def _jobs(c) -> int:
    s, b = await ahttp("GET", c.url(0) + "/jobs/overview")
    return len(b["jobs"])


async def test_browsers_from_elsewhere_and_non_json_bodies_are_refused(tmp_path):
    async with running(str(tmp_path), 2) as c:
        port = c.url(0).rsplit(":", 1)[1]
        # a form POST (what any web page may send without asking first): 415, nothing made
        s, b = await ahttp("POST", c.url(0) + "/jobs", raw=b'{"entry": "m:f"}',
                           headers={"Content-Type": "text/plain"})
        assert s == 415 and "application/json" in b["errors"][0]
        s, b = await ahttp("POST", c.url(0) + "/jobs", raw=b"entry=m:f",
                           headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert s == 415
        # a page of another origin, even with a JSON body (fetch, no-cors or not): 403
        s, b = await ahttp("POST", c.url(0) + "/jobs", JOB,
                           headers={"Origin": "https://evil.example"})
        assert s == 403 and "rest.allowed-origins" in b["errors"][0]
        s, b = await ahttp("POST", c.url(1) + "/cluster/rebalance",
                           headers={"Origin": "http://127.0.0.1:1"})
        assert s == 403
        assert await _jobs(c) == 0
        # DNS rebinding: this peer under a name that is not its own
        s, b = await ahttp("GET", c.url(0) + "/jobs/overview",
                           headers={"Host": f"evil.example:{port}"})
        assert s == 403 and "rest.allowed-hosts" in b["errors"][0]
        s, b = await ahttp("GET", c.url(0) + "/healthz", headers={"Host": f"evil.example:{port}"})
        assert s == 200  # probes call a peer by whatever name they have
        # the web UI's own pages, the CLI and curl with a JSON body: accepted
        s, b = await ahttp("POST", c.url(0) + "/jobs", JOB,
                           headers={"Origin": f"http://127.0.0.1:{port}"})
        assert s == 202, b
        s, b = await ahttp("POST", c.url(0) + "/jobs", raw=b'{"entry": "jobs_fixture:quick", '
                           b'"pyfiles": ["' + FIX.encode() + b'"]}',
                           headers={"Content-Type": "application/json; charset=utf-8",
                                    "Host": f"localhost:{port}"})
        assert s == 202, b
        assert await _jobs(c) == 2


async def test_configured_hosts_and_origins_and_a_token_open_the_guards(tmp_path):
    async with running(str(tmp_path), 1, {"rest.allowed-hosts": "jm.example, lb.example",
                                          "rest.allowed-origins": ["https://ui.example"]}) as c:
        port = c.url(0).rsplit(":", 1)[1]
        s, _ = await ahttp("GET", c.url(0) + "/overview", headers={"Host": f"lb.example:{port}"})
        assert s == 200
        s, b = await ahttp("POST", c.url(0) + "/jobs", JOB,
                           headers={"Origin": "https://ui.example"})
        assert s == 202, b
    token = {"Authorization": "Bearer tok"}
    async with running(str(tmp_path / "t"), 1, {"rest.auth.token": "tok"}) as c:
        port = c.url(0).rsplit(":", 1)[1]
        # with a token, a rebinding page has nothing to send: any name is fine
        s, _ = await ahttp("GET", c.url(0) + "/overview",
                           headers={"Host": f"any.example:{port}", **token})
        assert s == 200
        s, _ = await ahttp("GET", c.url(0) + "/overview", headers={"Host": f"any.example:{port}"})
        assert s == 401
        s, _ = await ahttp("POST", c.url(0) + "/jobs", JOB,
                           headers={"Origin": "https://evil.example", **token})
        assert s == 403


async def test_peers_show_a_credential_derived_from_the_secret(tmp_path):
    secret = "the-raft-password-too"
    async with running(str(tmp_path), 2, {"cluster.secret": secret}) as c:
        s, b = await ahttp("POST", c.url(0) + "/jobs",
                           {"entry": "jobs_fixture:wait_for_stop", "pyfiles": [FIX]})
        jid = b["jobid"]

        async def log_via_both():
            for i in range(2):  # one of them fetches it from the other peer
                s, b = await ahttp("GET", c.url(i) + f"/jobs/{jid}/logs")
                if s != 200 or "waiting for stop" not in b["text"]:
                    return False
            return b
        b = await apoll(log_via_both, 30, what="the log through both peers")
        owner = c.urls[[p.node for p in c.peers].index(b["node"])]
        q = f"/jobs/{jid}/logs?local=1"
        # the peer-to-peer endpoints take the derived credential, not the secret itself
        s, _ = await ahttp("GET", owner + q, headers={"Authorization": f"Bearer {secret}"})
        assert s == 401
        s, _ = await ahttp("GET", owner + q,
                           headers={"Authorization": f"Bearer {peer_credential(secret)}"})
        assert s == 200
        for p in c.peers:
            assert secret not in str(p.ground.peer_client.headers)
        await ahttp("PATCH", c.url(0) + f"/jobs/{jid}?mode=cancel")


async def test_the_peer_credential_opens_only_the_peer_to_peer_routes(tmp_path):
    """A peer credential seen on the wire (peers send it over plain HTTP by default) is
    not a general bearer: it reads what peers read of each other, and submits nothing."""
    async with running(str(tmp_path), 1, {"rest.auth.token": "tok",
                                          "cluster.secret": "s3cr3t"}) as c:
        user = {"Authorization": "Bearer tok"}
        peer = {"Authorization": f"Bearer {peer_credential('s3cr3t')}"}
        s, b = await ahttp("POST", c.url(0) + "/jobs", JOB, headers=user)
        assert s == 202, b
        jid = b["jobid"]
        async def log():
            s, b = await ahttp("GET", c.url(0) + f"/jobs/{jid}/logs?local=1", headers=peer)
            assert s in (200, 404), b  # (404 until the job has run)
            return s == 200
        await apoll(log, 30, what="the job's log with the peer credential")
        for path in ("/cluster/peers", "/cluster/identity"):
            s, b = await ahttp("GET", c.url(0) + path, headers=peer)
            assert s == 200, (path, b)
        for method, path, body in (("POST", "/jobs", JOB), ("POST", "/jobs?local=1", JOB),
                                   ("GET", "/overview", None), ("GET", "/jobs?local=1", None),
                                   ("PATCH", f"/jobs/{jid}?mode=cancel&local=1", None),
                                   ("GET", f"/jobs/{jid}/exceptions?local=1", None)):
            s, b = await ahttp(method, c.url(0) + path, body, headers=peer)
            assert s == 401 and "rest.auth.token" in b["errors"][0], (path, s, b)
        s, b = await ahttp("GET", c.url(0) + "/jobs/overview", headers=user)
        assert len(b["jobs"]) == 1 and "CANCEL" not in b["jobs"][0]["state"], b
        # /healthz is open (probes send nothing): its details (paths, addresses) are not
        s, h = await ahttp("GET", c.url(0) + "/healthz")
        assert s == 200 and h["ok"] is True and "disk-free" not in h and "disk-low" not in h
        assert "spark-remote" not in h and "disk-problem" not in h and "token" in h["details"]
        s, h = await ahttp("GET", c.url(0) + "/healthz", headers=user)
        assert s == 200 and {"disk-free", "disk-problem", "disk-low", "spark-remote"} <= set(h)


def test_a_peer_on_a_shared_address_needs_a_token_and_a_secret(tmp_path):
    from jm.peer.peer import Peer
    conf_dir, _ = make_conf(str(tmp_path), 1)
    me = PeerAddress("10.255.255.1", 8081, 6123)  # never bound: the peer refuses first
    with pytest.raises(ConfigError, match="rest.auth.token.*cluster.secret"):
        Peer(load_config(conf_dir), me, [me])
    with pytest.raises(ConfigError, match="cluster.secret"):
        Peer(load_config(conf_dir, {"rest.auth.token": "t"}), me, [me])
    Peer(load_config(conf_dir, {"rest.auth.token": "t", "cluster.secret": "s"}), me, [me])
    Peer(load_config(conf_dir, {"security.insecure": True}), me, [me])
    # loopback REST bound to every interface is exposed too
    lo = PeerAddress("127.0.0.1", 8081, 6123)
    with pytest.raises(ConfigError, match="0.0.0.0"):
        Peer(load_config(conf_dir, {"rest.bind-address": "0.0.0.0"}), lo, [lo])


def test_the_jobmanager_command_says_why_in_one_line(tmp_path):
    conf_dir = os.path.join(str(tmp_path), "conf")
    os.makedirs(conf_dir)
    with open(os.path.join(conf_dir, "masters"), "w") as f:
        f.write("10.255.255.1:18081:16123\n")
    with open(os.path.join(conf_dir, "config.yaml"), "w") as f:
        f.write(f"jobmanager.data-dir: {tmp_path}/data\nenv.log.dir: {tmp_path}/log\n")
    r = subprocess.run([sys.executable, "-m", "jm.peer", "--conf-dir", conf_dir],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "rest.auth.token" in lines[0] and "Traceback" not in r.stderr
    assert not os.path.exists(os.path.join(str(tmp_path), "data"))


async def test_in_process_cluster_refuses_too(tmp_path):
    c = InProcessCluster(str(tmp_path), 1, {"rest.bind-address": "0.0.0.0"})
    with pytest.raises(ConfigError):
        await c.start()
    await c.stop()


async def test_odd_credentials_and_json_are_clear_errors(tmp_path):
    """A non-UTF-8 Authorization header is a 401 (was a 500), JSON nested 200,000 deep
    and NaN / Infinity (not JSON, though Python reads them) are 400s; the peer lives."""
    import asyncio
    import json as js
    async with running(str(tmp_path), 1, {"rest.auth.token": "t0k"}) as c:
        port = int(c.url(0).rsplit(":", 1)[1])
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"GET /jobs/overview HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                     b"Authorization: Bearer \xff\xfe\xc3\r\nConnection: close\r\n\r\n" % port)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 401"), answer[:200]
        assert "credentials" in js.loads(body)["errors"][0]
        auth = {"Authorization": "Bearer t0k", "Content-Type": "application/json"}
        for raw, why in ((b'{"entry": "m:f", "slots": NaN}', "NaN is not a JSON value"),
                         (b'{"entry": "m:f", "args": {"x": -Infinity}}',
                          "-Infinity is not a JSON value"),
                         (b"[" * 200_000 + b"]" * 200_000, "nested too deeply")):
            s, b = await ahttp("POST", c.url(0) + "/jobs", raw=raw, headers=auth)
            assert s == 400 and why in b["errors"][0], (s, b)
        s, b = await ahttp("GET", c.url(0) + "/healthz")
        assert s == 200 and b["ok"]


def test_a_taken_connect_endpoint_port_stops_the_peer_naming_the_key(tmp_path):
    import socket
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    port = held.getsockname()[1]
    conf_dir = os.path.join(str(tmp_path), "conf")
    os.makedirs(conf_dir)
    with open(os.path.join(conf_dir, "masters"), "w") as f:
        f.write("127.0.0.1:18091:16133\n")
    with open(os.path.join(conf_dir, "config.yaml"), "w") as f:
        f.write(f"jobmanager.data-dir: {tmp_path}/data\nenv.log.dir: {tmp_path}/log\n"
                f"spark.connect.embedded: true\nspark.connect.endpoint.port: {port}\n")
    try:
        r = subprocess.run([sys.executable, "-m", "jm.peer", "--conf-dir", conf_dir],
                           capture_output=True, text=True, timeout=60, cwd=ROOT)
    finally:
        held.close()
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert "Traceback" not in r.stderr and lines, r.stderr
    assert "spark.connect.endpoint.port" in lines[-1] and str(port) in lines[-1], r.stderr
    assert not os.path.exists(os.path.join(str(tmp_path), "data", "127.0.0.1_18091", "raft",
                                           "journal")), "it joined before it refused"
    for bad in ("70000", "15010-15002", "x"):
        with open(os.path.join(conf_dir, "config.yaml"), "a") as f:
            f.write(f"spark.connect.endpoint.port: '{bad}'\n")
        r = subprocess.run([sys.executable, "-m", "jm.peer", "--conf-dir", conf_dir],
                           capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert r.returncode == 2 and "spark.connect.endpoint.port" in r.stderr, r.stderr
