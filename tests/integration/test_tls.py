"""HTTPS (rest.ssl.*) through real peers: REST over TLS with a private CA, peers calling
each other over https (a job's log read through the other peer, the membership check at
start-up), the jm CLI with --ca, and clear errors for a broken TLS configuration."""
import asyncio
import json
import os
import ssl
import subprocess
import sys

import aiohttp
import pytest

from jm.config import ConfigError
from tests.conftest import InProcessCluster
from tests.helpers import ROOT, apoll, make_pki

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"


async def _cli(env: dict, *args: str) -> subprocess.CompletedProcess:
    """The jm CLI in a thread: the peers share this test's event loop."""
    return await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "jm.client.cli", *args], env=env,
        capture_output=True, text=True, timeout=60, cwd=ROOT)


def tls_settings(pki: dict) -> dict:
    return {"rest.ssl.enabled": True, "rest.ssl.certificate": pki["cert"],
            "rest.ssl.key": pki["key"], "rest.ssl.ca": pki["ca"]}


async def test_rest_and_peer_calls_over_https(tmp_path):
    pki = make_pki(str(tmp_path))
    c = InProcessCluster(str(tmp_path / "c"), 2, tls_settings(pki))
    urls = [u.replace("http://", "https://") for u in c.urls]
    ctx = ssl.create_default_context(cafile=pki["ca"])
    await c.start()
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(urls[1] + "/overview", ssl=ctx) as r:
                assert r.status == 200 and (await r.json())["peers"] == 2
            with pytest.raises(aiohttp.ClientError):  # not the cluster's CA: refused
                async with http.get(urls[0] + "/overview") as r:
                    pass
            with pytest.raises(aiohttp.ClientError):  # plain HTTP gets no answer
                async with http.get(c.urls[0] + "/overview") as r:
                    await r.read()
            async with http.post(urls[0] + "/jobs", ssl=ctx,
                                 json={"entry": "jobs_fixture:wait_for_stop",
                                       "pyfiles": [FIX]}) as r:
                assert r.status == 202, await r.text()
                jid = (await r.json())["jobid"]

            async def log_through_both():
                for u in urls:  # one of the two fetches it from the other over https
                    async with http.get(u + f"/jobs/{jid}/logs", ssl=ctx) as r:
                        body = await r.json()
                        if r.status != 200 or "waiting for stop" not in body["text"]:
                            return False
                return True
            await apoll(log_through_both, 30, what="the job's log through both peers")
            # the jm CLI with the cluster's CA, and without it
            env = dict(os.environ, JM_CONF_DIR=c.conf_dir, JM_CA_FILE=pki["ca"])
            r = await _cli(env, "--json", "list")
            assert r.returncode == 0, r.stderr
            assert jid in [j["jid"] for j in json.loads(r.stdout)["jobs"]]
            env.pop("JM_CA_FILE")
            r = await _cli(env, "--timeout", "3", "list")
            assert r.returncode != 0 and "CERTIFICATE_VERIFY_FAILED" in r.stderr.upper()
            assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
            async with http.patch(urls[0] + f"/jobs/{jid}?mode=cancel", ssl=ctx) as r:
                assert r.status == 202
    finally:
        await c.stop()


def test_a_broken_tls_configuration_is_a_clear_error(tmp_path):
    from jm.cluster import tls
    from jm.config import load_config
    from tests.helpers import make_conf
    conf_dir, _ = make_conf(str(tmp_path), 1)
    with pytest.raises(ConfigError, match="rest.ssl.certificate and rest.ssl.key"):
        tls.server_context(load_config(conf_dir, {"rest.ssl.enabled": True}))
    with pytest.raises(ConfigError, match="cannot load"):
        tls.server_context(load_config(conf_dir, {
            "rest.ssl.enabled": True, "rest.ssl.certificate": str(tmp_path / "nope.pem"),
            "rest.ssl.key": str(tmp_path / "nope.key")}))
    with pytest.raises(ConfigError, match="rest.ssl.ca"):
        tls.client_context(load_config(conf_dir, {"rest.ssl.enabled": True,
                                                  "rest.ssl.ca": str(tmp_path / "no-ca.pem")}))
