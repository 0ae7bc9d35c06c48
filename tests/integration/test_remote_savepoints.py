"""Savepoints on a remote file system (s3://, gs://) through real peers: a real S3 API
server (moto's, on 127.0.0.1, stopped by pid), the peers' pyarrow.fs S3 client with
Flink's s3.* keys, a real boto3 client to look at the bucket; a real GCS API server
(gcp-storage-emulator) for gs://. Savepoint, stop-with-savepoint, resume from a remote
savepoint, an application read from gs://, and the refusals (a bucket that does not
exist, hdfs:// without a Hadoop client, an s3:// path that holds no savepoint)."""
from __future__ import annotations

import json

import pytest

from tests.conftest import InProcessCluster
from tests.s3server import BUCKET, keys, peer_settings, s3_server
from tests.helpers import ahttp, apoll, asubmit_to
from tests.integration.test_savepoints_moves import (job, resume_from, ticker_spec,
                                                     wait_batches, wait_savepoint,
                                                     wait_state)

@pytest.fixture
def s3(tmp_path):
    with s3_server(str(tmp_path / "moto.log")) as server:
        yield server


@pytest.fixture
async def running(tmp_path, s3):
    """3 peers with the S3 server's settings and a running ticker job: (cluster, job id,
    its output folder, the boto3 client)."""
    endpoint, client = s3
    out = tmp_path / "out"
    c = InProcessCluster(str(tmp_path), 3, s3_conf(endpoint))
    try:
        await c.start()
        jid = await asubmit_to(c, ticker_spec(out))
        await wait_state(c, jid, "RUNNING")
        yield c, jid, out, client
    finally:
        await c.stop()


def s3_conf(endpoint: str) -> dict:
    return {"rebalance.strategy": "none", **peer_settings(endpoint)}


async def wait_done(c, jid, rid, peer=0):
    return await wait_savepoint(c, jid, rid, peer, timeout=60)  # uploads take longer


@pytest.mark.slow
async def test_savepoint_stop_and_resume_on_s3(tmp_path, running):
    c, jid, out, client = running
    await wait_batches(out, 3)
    # Hadoop's s3a:// spelling, asked of a peer that may not run the job
    s, b = await ahttp("POST", c.url(1) + f"/jobs/{jid}/savepoints",
                       {"target-directory": "s3a://savepoints/running", "triggerId": "r1"})
    assert (s, b) == (202, {"request-id": "r1"})
    sp = await wait_done(c, jid, "r1", peer=2)
    loc = sp["operation"]["location"]
    assert loc.startswith("s3://savepoints/running/savepoint-"), loc
    prefix = loc[len("s3://savepoints/"):]
    stored = keys(client, prefix)
    assert f"{prefix}/_metadata" in stored
    assert any(k.startswith(f"{prefix}/checkpoint/ticks/commits/") for k in stored)
    meta = json.loads(client.get_object(Bucket=BUCKET, Key=f"{prefix}/_metadata")
                      ["Body"].read())
    assert meta["job-id"] == jid and meta["queries"]["ticks"]["last-committed-batch"] >= 2
    # nothing was left staged next to the job's checkpoint
    assert not [p for p in tmp_path.rglob(".savepoint-*.staging")]
    # stop-with-savepoint to s3://, then a new job resumes from it
    s, b = await ahttp("POST", c.url(2) + f"/jobs/{jid}/stop",
                       {"targetDirectory": "s3://savepoints/stopped"})
    assert s == 202, b
    stop_loc = (await wait_done(c, jid, b["request-id"]))["operation"]["location"]
    assert stop_loc.startswith("s3://savepoints/stopped/savepoint-")
    j = await wait_state(c, jid, "FINISHED")
    assert j["savepoint"] == stop_loc
    jid2 = await resume_from(c, out, stop_loc, j)
    assert (await job(c, jid2))["spec"]["savepoint-path"] == stop_loc


@pytest.mark.slow
async def test_remote_refusals_are_clear(tmp_path, running):
    c, jid, out, client = running
    u = c.url(0)
    # a bucket that does not exist: the savepoint fails with the store's reason
    s, b = await ahttp("POST", u + f"/jobs/{jid}/savepoints",
                       {"target-directory": "s3://no-such-bucket/sp", "triggerId": "nb"})
    assert s == 202, b

    async def failed():
        s, b = await ahttp("GET", u + f"/jobs/{jid}/savepoints/nb")
        return b if b["status"]["id"] == "COMPLETED" and "failure-cause" in b[
            "operation"] else None
    b = await apoll(failed, 60, what="the failed savepoint")
    cause = json.dumps(b["operation"]["failure-cause"])
    assert "no-such-bucket" in cause, cause
    assert (await job(c, jid))["state"] == "RUNNING"  # the job runs on
    # hdfs:// without a Hadoop client on the peers: a 400 that says what is missing
    s, b = await ahttp("POST", u + f"/jobs/{jid}/savepoints",
                       {"target-directory": "hdfs://127.0.0.1:9/sp"})
    assert s == 400 and "Hadoop client" in b["errors"][0], b
    for bad, words in (("ftp://h/x", "not a file system"), ("s3://Bad_Bucket/x", "bucket")):
        s, b = await ahttp("POST", u + f"/jobs/{jid}/savepoints",
                           {"target-directory": bad})
        assert s == 400 and words in b["errors"][0], b
    # an s3:// path without a savepoint is not resumed from
    s, b = await ahttp("POST", u + "/jobs", ticker_spec(
        out, **{"savepoint-path": "s3://savepoints/nothing-here"}))
    assert s == 400 and "not a savepoint" in b["errors"][0], b
    assert keys(client, "") == []  # nothing written by the refusals


@pytest.mark.slow
async def test_savepoints_and_an_application_on_gs(tmp_path):
    """gs:// through a real GCS API server (gcp-storage-emulator): a savepoint while the
    job runs, a stop-with-savepoint, a job resumed from it, and a script read from gs://
    (copied into an artifact, run by any peer)."""
    from tests.gcsserver import BUCKET as GS, gcs_server, names, put
    from tests.gcsserver import peer_settings as gs_settings
    out, done = tmp_path / "out", tmp_path / "done.txt"
    with gcs_server(str(tmp_path / "gcs.log")) as endpoint:
        c = InProcessCluster(str(tmp_path / "c"), 3,
                             {"rebalance.strategy": "none", **gs_settings(endpoint)})
        try:
            await c.start()
            jid = await asubmit_to(c, ticker_spec(out))
            await wait_state(c, jid, "RUNNING")
            await wait_batches(out, 3)
            s, b = await ahttp("POST", c.url(1) + f"/jobs/{jid}/savepoints",
                               {"target-directory": f"gs://{GS}/running", "triggerId": "g1"})
            assert (s, b) == (202, {"request-id": "g1"})
            loc = (await wait_done(c, jid, "g1", peer=2))["operation"]["location"]
            assert loc.startswith(f"gs://{GS}/running/savepoint-"), loc
            prefix = loc[len(f"gs://{GS}/"):]
            assert f"{prefix}/_metadata" in names(endpoint, prefix)
            s, b = await ahttp("POST", c.url(2) + f"/jobs/{jid}/stop",
                               {"targetDirectory": f"gs://{GS}/stopped"})
            assert s == 202, b
            stop_loc = (await wait_done(c, jid, b["request-id"]))["operation"]["location"]
            assert stop_loc.startswith(f"gs://{GS}/stopped/savepoint-"), stop_loc
            j = await wait_state(c, jid, "FINISHED")
            jid2 = await resume_from(c, out, stop_loc, j)
            assert (await job(c, jid2))["spec"]["savepoint-path"] == stop_loc
            # an application on gs://, as spark-submit takes one
            put(endpoint, "apps/app.py", f"open({str(done)!r}, 'w').write('ran')\n".encode())
            s, b = await ahttp("POST", c.url(0) + "/jobs", {"script": f"gs://{GS}/apps/app.py"})
            assert s == 202, b
            await wait_state(c, b["jobid"], "FINISHED")
            assert done.read_text() == "ran"
            s, b = await ahttp("POST", c.url(0) + "/jobs", {"script": f"gs://{GS}/apps/none.py"})
            assert s == 400 and "none.py" in b["errors"][0], b
        finally:
            await c.stop()
