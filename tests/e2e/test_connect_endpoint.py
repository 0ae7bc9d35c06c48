"""The peers' Spark Connect endpoint through the real parts: a peer (real Raft, REST over
TLS, its embedded Spark Connect JVM) on the address of a bridge this test creates, and
pyspark's own client in another network namespace, as a notebook on another host uses
the cluster: `SparkSession.builder.remote("sc://peer:port/;token=...")` with DataFrames,
SQL, a Python UDF and a streaming query; refusals before Spark (no token, a wrong one, a
read role), the tenant's session quota, sessions listed with their tenant, and an idle
session closed."""
import asyncio
import json
import os
import ssl
import subprocess
import sys

import aiohttp
import pytest

from chaos import netns
from jm.config import load_config, read_masters
from jm.local.localcluster import write_conf
from jm.runtime.ports import free_ports
from tests.helpers import CLASS_ARCHIVE, ROOT, apoll, make_pki

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not netns.available(), reason="needs root and iproute2")]

TOKEN = "connect-root"
CLIENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "connect_client.py")
SUBNET = 219


class Rest:
    """HTTPS requests to the peer with its CA."""

    def __init__(self, url: str, ca: str) -> None:
        self.url, self.ctx = url, ssl.create_default_context(cafile=ca)

    async def __call__(self, method: str, path: str, body=None, token: str = TOKEN):
        async with aiohttp.ClientSession() as http:
            async with http.request(method, self.url + path, json=body, ssl=self.ctx,
                                    headers={"Authorization": f"Bearer {token}"}) as r:
                return r.status, await r.json(content_type=None)


async def _client(net, ca: str, *args: str, stdin: bytes = b"") -> dict:
    """connect_client.py in the client's namespace; its last line of output."""
    env = {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": ca, "PYTHONPATH": ROOT}
    proc = await asyncio.to_thread(
        subprocess.run, [*net.exec_prefix(0), sys.executable, CLIENT, *args], env=env,
        input=stdin, capture_output=True, timeout=240)
    lines = proc.stdout.decode().strip().splitlines()
    assert proc.returncode == 0 and lines, proc.stderr.decode()[-3000:]
    return json.loads(lines[-1])


async def test_a_notebook_on_another_host_uses_the_clusters_spark(tmp_path):
    net = netns.TestNet(1, prefix="jmq", subnet=SUBNET)
    net.create()
    peer = None
    try:
        host = f"10.{SUBNET}.0.1"  # the bridge's address: the peer's "host"
        pki = make_pki(str(tmp_path), ips=(host, "127.0.0.1"))
        rest_port, raft_port = free_ports(2)
        conf_dir = write_conf(str(tmp_path / "c"), [f"{host}:{rest_port}:{raft_port}"], {
            "rest.auth.token": TOKEN, "cluster.secret": "connect-secret", "rest.ssl.enabled": True,
            "rest.ssl.certificate": pki["cert"], "rest.ssl.key": pki["key"],
            "rest.ssl.ca": pki["ca"], "spark.connect.embedded": True,
            "spark.master": "local[1]", "spark.driver.memory": "768m",
            "spark.class-archive": CLASS_ARCHIVE, "jobmanager.executor.preload": "none",
            "sql-gateway.session.idle-timeout": "10 s", "restart-strategy.type": "none"})
        from jm.peer.peer import Peer
        masters = read_masters(os.path.join(conf_dir, "masters"))
        peer = Peer(load_config(conf_dir), masters[0], masters)
        await peer.start()
        rest = Rest(f"https://{host}:{rest_port}", pki["ca"])

        async def spark_ready():
            s, b = await rest("GET", "/healthz")
            return s == 200 and b.get("spark-ready")
        await apoll(spark_ready, 240, interval=0.5, what="the peer's Spark ready")
        s, nodes = await rest("GET", "/nodes")
        endpoint = nodes["nodes"][0]["connect-endpoint"]
        assert endpoint.startswith(f"sc://{host}:"), nodes
        tokens = {}
        for name, role, tenant in (("ana", "submit", "sales"), ("rita", "read", "sales"),
                                   ("quinn", "submit", "ops")):
            s, b = await rest("POST", "/tokens", {"name": name, "role": role,
                                                  "tenant": tenant})
            assert s == 201, b
            tokens[name] = b["token"]
        s, b = await rest("PUT", "/tenants/ops", {"sessions": 1})
        assert s == 200, b

        # the user's work: DataFrames, SQL, a UDF, streaming; the session released at the end
        out = await _client(net, pki["ca"], "work", endpoint, tokens["ana"])
        assert out["groups"] == [[0, 334], [1, 333], [2, 333]], out
        assert out["sql"] == sum(i for i in range(1000) if i % 3 == 1)
        assert out["udf"] == [0, 1, 4, 9] and out["streamed"] and out["stream_active"]
        s, listed = await rest("GET", "/cluster/sessions?kind=connect")
        assert s == 200 and listed["sessions"] == [], listed  # (released by spark.stop())

        # refused before Spark, saying why
        for token, code, words in (("", "UNAUTHENTICATED", "missing or wrong token"),
                                   ("not-a-token", "UNAUTHENTICATED", "missing or wrong"),
                                   (tokens["rita"], "PERMISSION_DENIED", "submit role")):
            out = await _client(net, pki["ca"], "refused", endpoint, token)
            assert (out["code"], words in out["message"]) == (code, True), out

        # the tenant's session quota, and the list with the tenant
        out = await _client(net, pki["ca"], "quota", endpoint, tokens["quinn"])
        second = out["second"]
        assert second["code"] == "RESOURCE_EXHAUSTED" and "tenant ops holds 1" in \
            second["message"], out

        # an idle session is closed (in Spark too), and its client hears why
        env = {**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": pki["ca"],
               "PYTHONPATH": ROOT}
        proc = await asyncio.create_subprocess_exec(
            *net.exec_prefix(0), sys.executable, CLIENT, "idle", endpoint, tokens["ana"],
            env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        try:
            first = json.loads(await asyncio.wait_for(proc.stdout.readline(), 240))

            async def listed_with_tenant():
                s, b = await rest("GET", "/cluster/sessions?kind=connect")
                rows = [r for r in b["sessions"] if r["id"] == first["session_id"]]
                return rows and rows[0]
            row = await apoll(listed_with_tenant, 30, what="the session listed")
            assert (row["tenant"], row["submitter"], row["endpoint"]) == \
                ("sales", "ana", endpoint), row
            s, seen = await rest("GET", "/cluster/sessions", token=tokens["quinn"])
            assert seen["sessions"] == [], seen  # (another tenant's: not shown)

            async def gone():
                s, b = await rest("GET", "/cluster/sessions?kind=connect")
                return all(r["id"] != first["session_id"] for r in b["sessions"])
            await apoll(gone, 60, interval=0.5, what="the idle session closed")
            proc.stdin.write(b"go\n")
            await proc.stdin.drain()
            stdout, stderr = await asyncio.wait_for(proc.communicate(), 120)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        out = json.loads(stdout.decode().strip().splitlines()[-1])
        assert out["code"] == "NOT_FOUND" and "idle for more than 10 s" in out["message"], \
            (out, stderr.decode()[-2000:])
    finally:
        if peer is not None:
            await peer.stop()
        net.destroy()
