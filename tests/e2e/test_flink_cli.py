"""Apache Flink's own tools drive a 3-peer cluster: the `flink` CLI of the Flink 2.3
distribution from PyPI (bench/flinkdist.py; a JVM per call) lists, savepoints, stops (to s3:// on a real S3 API
server) and cancels streaming jobs on any peer, and a Python Flink REST client from PyPI
(flink-rest-client, which prefixes /v1) reads the configuration, overviews and job status
and triggers a savepoint with cancel-job. Each step checks the cluster's state after it."""
import os
import re
import shutil
import subprocess

import pytest

from bench import flinkdist
from jm.testing import MiniCluster
from tests.helpers import http, poll
from tests.s3server import keys, peer_settings, s3_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]
FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "integration") + "/"


@pytest.fixture(scope="module")
def flink_home():
    """The Flink home (downloaded once into bench/.flink, which bin/test.sh also fills);
    a skip that says why when PyPI cannot be reached."""
    try:
        return flinkdist.ensure_home(log=lambda msg: None)
    except (subprocess.CalledProcessError, OSError) as exc:
        pytest.skip(f"could not download Apache Flink {flinkdist.FLINK_VERSION} from PyPI "
                    f"into bench/.flink ({exc})")


def ticker(out):
    return {"entry": "jobs_fixture:ticker", "pyfiles": [FIX], "job-type": "streaming",
            "args": {"output": str(out), "interval": 0.1}}


class Flink:
    """The `flink` CLI against a peer's REST address, its log in the test's folder."""

    def __init__(self, home, tmp):
        self.cli = os.path.join(home, "bin", "flink")
        self.env = dict(os.environ, FLINK_LOG_DIR=str(tmp / "flink-log"),
                        FLINK_CONF_DIR=os.path.join(home, "conf"))
        os.makedirs(self.env["FLINK_LOG_DIR"], exist_ok=True)

    def __call__(self, url, *args, conf_dir=None, ok=True):
        env = dict(self.env, **({"FLINK_CONF_DIR": conf_dir} if conf_dir else {}))
        cmd = [self.cli, args[0]] + ([] if conf_dir else ["-m", url.split("//")[1]]) + \
            list(args[1:])
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert (p.returncode == 0) == ok, \
            f"{' '.join(cmd)}: {p.returncode}\n{p.stdout}\n{p.stderr}"
        return p.stdout + p.stderr if not ok else p.stdout


def job(c, jid, peer=0):
    s, b = http("GET", c.url(peer) + f"/jobs/{jid}")
    assert s == 200, b
    return b


def wait_state(c, jid, state, peer=0):
    return poll(lambda: (lambda j: j if j["state"] == state else None)(job(c, jid, peer)),
                60, what=f"{jid} {state}")


def saved_at(out):
    m = re.search(r"Savepoint completed\. Path: (\S+)", out)
    assert m, out
    return m.group(1)


def test_flink_cli_and_python_client_drive_the_cluster(tmp_path, flink_home):
    from flink_rest_client import FlinkRestClient
    flink = Flink(flink_home, tmp_path)
    with s3_server(str(tmp_path / "moto.log")) as (endpoint, s3), \
            MiniCluster(peers=3, base_dir=str(tmp_path / "c"),
                        conf={"jobmanager.log.level": "INFO", **peer_settings(endpoint)}) as c:
        ids = [c.submit(ticker(tmp_path / f"out{i}"), peer=i % 3) for i in range(4)]
        own = c.submit({"entry": "jobs_fixture:quick", "pyfiles": [FIX], "jobid": "own-id"})
        for jid in ids:
            wait_state(c, jid, "RUNNING")

        # flink list, with the REST address in a Flink conf dir (rest.address / rest.port)
        conf = tmp_path / "flink-conf"
        conf.mkdir()
        for f in ("log4j-cli.properties", "logback.xml"):
            shutil.copy(os.path.join(flink_home, "conf", f), conf)
        host, port = c.url(1).split("//")[1].split(":")
        (conf / "config.yaml").write_text(f"rest:\n  address: {host}\n  port: {port}\n")
        out = flink(c.url(1), "list", conf_dir=str(conf))
        for jid in ids:
            assert f": {jid} : jobs_fixture:ticker (RUNNING)" in out, out
        assert own not in out  # not a Flink JobID: left out, the list still readable

        # flink savepoint <id> <dir>: the job runs on, the savepoint is the job's latest
        a, b, d, e = ids
        loc = saved_at(flink(c.url(2), "savepoint", a, f"file://{tmp_path}/sp"))
        assert loc.startswith(f"{tmp_path}/sp/") and os.path.exists(f"{loc}/_metadata"), loc
        poll(lambda: http("GET", c.url(0) + f"/jobs/{a}/savepoints")[1]["latest-location"]
             == loc, 30, what="the savepoint on another peer")
        assert job(c, a)["state"] == "RUNNING"
        # a savepoint that fails: Flink's client reads our failure (a Java SerializedThrowable)
        out = flink(c.url(1), "savepoint", a, "/proc/jm-no-such-dir", ok=False)
        assert "SavepointFailed: could not write savepoint /proc/jm-no-such-dir/" in out, out
        assert job(c, a)["state"] == "RUNNING"

        # flink stop --savepointPath <uri> <id>: stop-with-savepoint to S3 (Hadoop's s3a://
        # spelling, as Flink users write it), the job FINISHED
        loc = saved_at(flink(c.url(0), "stop", "--savepointPath", "s3a://savepoints/stops",
                             b))
        assert loc.startswith("s3://savepoints/stops/savepoint-"), loc
        assert f"{loc[len('s3://savepoints/'):]}/_metadata" in keys(s3, "stops/")
        j = wait_state(c, b, "FINISHED", peer=1)
        assert j["savepoint"] == loc and j["attempts"][-1]["end-reason"] == "stopped", j

        # flink cancel <id>
        out = flink(c.url(1), "cancel", d)
        assert f"Cancelled job {d}" in out, out
        wait_state(c, d, "CANCELED", peer=2)

        # a Python Flink REST client (it prefixes /v1)
        client = FlinkRestClient.get(host="127.0.0.1", port=int(c.url(2).rsplit(":", 1)[1]))
        assert client.config()["flink-version"] == flinkdist.FLINK_VERSION
        assert client.overview()["taskmanagers"] == 3
        rows = {r["jid"]: r for r in client.jobs.overview()}
        assert rows[d]["state"] == "CANCELED" and rows[a]["tasks"]["running"] == 1, rows
        assert client.jobs.get(a)["state"] == "RUNNING"
        s, st = http("GET", c.url(2) + f"/v1/jobs/{a}/status")
        assert (s, st) == (200, {"status": "RUNNING"})
        trigger = client.jobs.create_savepoint(a, f"file://{tmp_path}/sp3", cancel_job=True)
        done = poll(lambda: (lambda r: r if r["status"]["id"] == "COMPLETED" else None)(
            trigger.status), 60, what="cancel-job savepoint")
        assert done["operation"]["location"].startswith(f"{tmp_path}/sp3/"), done
        wait_state(c, a, "FINISHED", peer=2)
        assert client.jobs.terminate(e) is True  # PATCH /v1/jobs/{id}, no mode
        wait_state(c, e, "CANCELED")

        out = flink(c.url(0), "list", "-a")
        assert "No running jobs." in out or "Running/Restarting Jobs" not in out, out
        for jid, state in ((a, "FINISHED"), (b, "FINISHED"), (d, "CANCELED"), (e, "CANCELED")):
            assert f": {jid} : jobs_fixture:ticker ({state})" in out, out
