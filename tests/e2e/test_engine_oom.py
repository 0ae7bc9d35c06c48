"""A streaming job whose micro-batch runs its engine out of memory, through the real parts
(an in-process peer, real Raft and REST, a real Spark Connect JVM of 512 MB shared by two
streaming jobs, real job processes): the engine dies and restarts; the job is told that
its query ran the engine out of memory and in which micro-batch (not a stopped
SparkContext); restarted from its checkpoint it runs the same micro-batch again, and at
that second death in a row it is failed instead of restarted, whatever its restart
strategy still allows. The pipeline beside it on the same engine restarts each time and
runs on."""
import pytest

from tests.conftest import running
from tests.helpers import ahttp, apoll
from tests.integration.test_streaming_progress import FIX

pytestmark = pytest.mark.slow
RESTARTS = {"type": "fixed-delay", "attempts": 10, "delay": "1 s"}


async def _job(c, jid):
    s, b = await ahttp("GET", c.url(0) + f"/jobs/{jid}")
    assert s == 200, b
    return b


async def _batches(c, jid, at_least):
    job = await _job(c, jid)
    queries = (job.get("progress") or {}).get("queries") or []
    return job if job["state"] == "RUNNING" and queries and \
        (queries[0].get("batch") or 0) >= at_least else None


async def test_a_streaming_job_that_keeps_running_its_engine_out_of_memory_is_failed(tmp_path):
    settings = {"spark.master": "local[1]", "spark.driver.memory": "512m",
                "spark.conf.spark.sql.shuffle.partitions": 2,
                "jobmanager.streaming.progress-interval": "1 s"}
    async with running(str(tmp_path), 1, settings, spark=True) as c:
        s, b = await ahttp("POST", c.url(0) + "/jobs", {
            "entry": "progress_jobs:rates", "pyfiles": [FIX], "job-type": "streaming",
            "args": {"name": "neighbour", "rate": 5}, "restart-strategy": RESTARTS})
        assert s == 202, b
        neighbour = b["jobid"]
        await apoll(lambda: _batches(c, neighbour, 1), 240, interval=0.5,
                    what="the neighbour's micro-batches")
        s, b = await ahttp("POST", c.url(0) + "/jobs", {
            "entry": "progress_jobs:hog", "pyfiles": [FIX], "job-type": "streaming",
            "restart-strategy": RESTARTS})
        assert s == 202, b
        hog = b["jobid"]

        async def failed():
            job = await _job(c, hog)
            return job if job["state"] == "FAILED" else None
        job = await apoll(failed, 400, interval=0.5, what="the hog failed")
        assert job["restarts"] == 1, job  # one death blamed, restarted; the second: failed
        s, ex = await ahttp("GET", c.url(0) + f"/jobs/{hog}/exceptions")
        assert s == 200, ex
        text = str(ex)
        assert "EngineLost: the Spark engine peer that ran this job" in text, ex
        assert "ran it out of memory in micro-batch" in text, ex
        assert "this job's streaming query" in text and "streaming micro-batch" in text, ex

        # the neighbour lost its attempt at each death, was never blamed, and runs on
        async def recovered():
            job = await _batches(c, neighbour, 0)
            return job if job and job["restarts"] >= 2 else None
        job = await apoll(recovered, 240, interval=0.5, what="the neighbour running again")
        s, ex = await ahttp("GET", c.url(0) + f"/jobs/{neighbour}/exceptions")
        assert s == 200 and "EngineLost" in str(ex), ex
        assert "ran it out of memory" not in str(ex) and "statement was running" not in str(ex)
