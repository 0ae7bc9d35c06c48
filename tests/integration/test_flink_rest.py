"""Flink REST compatibility through real peers (real Raft, REST, job processes): the
/v1 prefix, GET /config, GET /jobs/{id}/status, Flink's savepoint bodies (cancel-job,
formatType, file:// targets), case-insensitive modes, refused remote targets. The real
`flink` CLI and a real Python Flink client drive a cluster in tests/e2e/test_flink_cli.py."""
import os

from tests.conftest import running
from tests.helpers import ahttp, apoll

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"


def ticker(out):
    return {"entry": "jobs_fixture:ticker", "pyfiles": [FIX], "job-type": "streaming",
            "args": {"output": str(out), "interval": 0.05}}


async def status(c, jid, peer=0, prefix="/v1"):
    s, b = await ahttp("GET", c.url(peer) + f"{prefix}/jobs/{jid}/status")
    assert s == 200, b
    assert set(b) == {"status"}
    return b["status"]


async def wait_status(c, jid, want, peer=0):
    async def check():
        return await status(c, jid, peer) == want
    await apoll(check, 30, what=f"{jid} {want}")


async def test_flink_rest_surface(tmp_path):
    async with running(str(tmp_path), 3) as c:
        # the web UI's first call and the SQL gateway's own /v1 routes side by side
        for path in ("/config", "/v1/config"):
            s, b = await ahttp("GET", c.url(1) + path)
            assert s == 200 and b["flink-version"] and "features" in b, b
        s, b = await ahttp("GET", c.url(0) + "/v1/info")
        assert s == 200 and "productName" in b, b
        s, b = await ahttp("GET", c.url(0) + "/v1/overview")
        assert s == 200 and b["taskmanagers"] == 3, b
        s, b = await ahttp("GET", c.url(0) + "/v1/nope")
        assert s == 404 and b["errors"] == ["no such resource: GET /v1/nope"], b
        s, b = await ahttp("GET", c.url(0) + "/v1/jobs/0000/status")
        assert s == 404 and "not found" in b["errors"][0], b

        s, b = await ahttp("POST", c.url(0) + "/v1/jobs", ticker(tmp_path / "a"))
        assert s == 202, b
        a = b["jobid"]
        s, b = await ahttp("POST", c.url(2) + "/jobs", ticker(tmp_path / "b"))
        b_id = b["jobid"]
        await wait_status(c, a, "RUNNING", peer=1)
        assert await status(c, a, 2, prefix="") == "RUNNING"
        s, b = await ahttp("GET", c.url(0) + f"/v1/jobs/{a}/logs?format=bogus")
        assert s == 400 and "format" in b["errors"][0], b  # the query string goes along
        s, b = await ahttp("GET", c.url(0) + f"/v1/jobs/{a}/logs?tail=1&format=json")
        assert s == 200 and b["job"] == a, b
        s, b = await ahttp("POST", c.url(2) + "/jobs", {**ticker(tmp_path / "o"),
                                                         "jobid": "not-a-flink-id"})
        assert s == 202, b
        s, b = await ahttp("GET", c.url(2) + "/v1/jobs/overview")
        row = next(r for r in b["jobs"] if r["jid"] == a)
        assert row["tasks"]["total"] == 1 and row["last-modification"] > 0, row
        assert "not-a-flink-id" not in {r["jid"] for r in b["jobs"]}  # Flink's JobIDs only
        s, b = await ahttp("GET", c.url(2) + "/jobs/overview")
        assert "not-a-flink-id" in {r["jid"] for r in b["jobs"]}
        await ahttp("PATCH", c.url(2) + "/jobs/not-a-flink-id?mode=cancel")

        # Flink's own savepoint body, a Hadoop-style target, polled under /v1
        body = {"target-directory": f"file://{tmp_path}/sp", "cancel-job": False,
                "formatType": "CANONICAL", "triggerId": None}
        s, b = await ahttp("POST", c.url(1) + f"/v1/jobs/{a}/savepoints", body)
        assert s == 202, b
        rid = b["request-id"]

        async def done(job, rid):
            s, b = await ahttp("GET", c.url(2) + f"/v1/jobs/{job}/savepoints/{rid}")
            assert s == 200, b
            return b if b["status"]["id"] == "COMPLETED" else None
        sp = await apoll(lambda: done(a, rid), 30, what="savepoint")
        loc = sp["operation"]["location"]
        assert loc.startswith(f"{tmp_path}/sp/") and os.path.exists(loc + "/_metadata"), sp
        assert await status(c, a, 2) == "RUNNING"

        # a scheme the peers cannot open (hdfs:// without a Hadoop client) or do not know:
        # a 400 that says why (s3:// savepoints: tests/integration/test_remote_savepoints.py)
        for target, words in (("hdfs://nn:8020/sp", "Hadoop client"),
                              ("ftp://h/sp", "not a file system"),
                              ("hdfs://hdfs@nn:8020/sp", "names no user")):
            s, b = await ahttp("POST", c.url(0) + f"/v1/jobs/{a}/savepoints",
                               {"target-directory": target, "cancel-job": False})
            assert s == 400 and words in b["errors"][0], b

        # cancel-job: true is a savepoint and the end of the job
        s, b = await ahttp("POST", c.url(0) + f"/v1/jobs/{a}/savepoints",
                           {"target-directory": str(tmp_path / "sp2"), "cancel-job": True})
        assert s == 202, b
        sp = await apoll(lambda: done(a, b["request-id"]), 30, what="cancel-job savepoint")
        assert sp["operation"]["location"].startswith(str(tmp_path / "sp2"))
        await wait_status(c, a, "FINISHED", peer=1)

        # Flink's TerminationMode in capitals
        s, b = await ahttp("PATCH", c.url(1) + f"/v1/jobs/{b_id}?mode=CANCEL")
        assert (s, b) == (202, {}), b  # Flink's EmptyResponseBody under /v1
        await wait_status(c, b_id, "CANCELED", peer=0)
        s, b = await ahttp("PATCH", c.url(1) + f"/jobs/{b_id}?mode=STOP")
        assert s == 400 and "/stop" in b["errors"][0], b
