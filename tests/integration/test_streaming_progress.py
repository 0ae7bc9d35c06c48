"""Issue 31, per-pipeline observability, through the real parts: a real peer with its
real Spark Connect server runs a real streaming job (rate source, stateful aggregation);
the StreamingQueryListener in its job process reports the queries' last progress, which
the peer commits to the replicated job record (at most once per
jobmanager.streaming.progress-interval), shows in GET /jobs/<id> and `jm status`, and
exports as jm_job_* series with job and tenant labels, gone once the job ends. The job's
output is teed to the peer's stdout with its job and attempt (jobmanager.job-log.stdout)."""
import asyncio
import os
import re

import pytest
from prometheus_client.openmetrics.parser import \
    text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from tests.conftest import running
from tests.e2e.test_web_ui import browser, shot  # noqa: F401 (a fixture: headless Chromium)
from tests.helpers import ahttp, apoll
from tests.integration.test_cli import jm
from tests.integration.test_metrics_exposition import OPENMETRICS, scrape

pytestmark = pytest.mark.slow  # Spark JVMs: a Connect server, classic drivers
FIX = os.path.dirname(os.path.abspath(__file__)) + "/"
SERIES = ("jm_job_up", "jm_job_last_batch_timestamp_seconds", "jm_job_input_rows_per_second",
          "jm_job_processed_rows_per_second", "jm_job_batch_duration_seconds",
          "jm_job_state_rows")


async def job_series(url: str, jid: str) -> dict:
    s, text = await ahttp("GET", url + "/metrics")
    assert s == 200
    return {x.name: x for fam in parse_text(text) for x in fam.samples
            if x.labels.get("job") == jid}


def ui_progress(driver, url: str, jid: str, folder) -> str:
    """The job page's last-progress table, as the browser shows it (a screenshot in
    `folder`, or docs/screenshots with JM_UPDATE_SCREENSHOTS=1)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait
    driver.get(f"{url}/#/job/{jid}")
    WebDriverWait(driver, 30).until(
        lambda d: "rates" in d.find_element(By.ID, "progress").text
        and d.find_element(By.ID, "progress-card").is_displayed())
    driver.execute_script("document.getElementById('progress-card').scrollIntoView()")
    shot(driver, folder, "job-progress")
    return driver.find_element(By.ID, "progress").text


async def test_listener_progress_metrics_status_and_stdout_tee(tmp_path, capfd, browser):
    settings = {"jobmanager.streaming.progress-interval": "1 s",
                "jobmanager.job-log.stdout": True, "spark.driver.memory": "512m",
                "spark.conf.spark.sql.shuffle.partitions": 2}
    async with running(str(tmp_path), 1, settings, spark=True) as c:
        s, b = await ahttp("POST", c.url(0) + "/jobs", {
            "entry": "progress_jobs:rates", "pyfiles": [FIX], "job-type": "streaming",
            "args": {"name": "rates", "rate": 50}})
        assert s == 202, b
        jid = b["jobid"]

        async def progressed():
            s, job = await ahttp("GET", c.url(0) + f"/jobs/{jid}")
            queries = (job.get("progress") or {}).get("queries") or []
            q = queries[0] if queries else {}
            return job if (q.get("batch") or 0) >= 2 and q.get("state-rows") else None
        job = await apoll(progressed, 240, interval=0.5, what="the job's progress, 3 batches")
        [q] = job["progress"]["queries"]
        assert q["name"] == "rates" and q["state-rows"] == 10, q  # 10 keys counted
        assert q["input-rows-per-second"] >= 0 and q["processed-rows-per-second"] >= 0
        assert q["batch-duration-ms"] > 0 and q["time"] > 0, q

        async def exported():
            got = await job_series(c.url(0), jid)
            return got if set(SERIES) <= set(got) and got["jm_job_state_rows"].value else None
        got = await apoll(exported, 60, interval=0.5, what="the job's jm_job_* series")
        assert got["jm_job_up"].value == 1
        assert got["jm_job_up"].labels == {"peer": c.peers[0].node, "job": jid,
                                           "tenant": "default"}
        assert got["jm_job_state_rows"].value == 10
        assert got["jm_job_processed_rows_per_second"].value >= 0
        assert got["jm_job_last_batch_timestamp_seconds"].value > 1e9

        _, text = await scrape(c.url(0), OPENMETRICS)  # a strict parser takes them too
        fams = {f.name: f for f in parse_openmetrics(text)}
        assert [x.labels["job"] for x in fams["jm_job_state_rows"].samples] == [jid]

        table = await asyncio.to_thread(ui_progress, browser, c.url(0), jid, tmp_path)
        assert "PROCESSED ROWS/S" in table.upper() and "rates" in table, table

        rc, out, err = await jm("--address", c.url(0), "status", jid)
        assert rc == 0, err
        assert "last progress" in out and "PROCESSED ROWS/S" in out, out
        row = next(line for line in out.splitlines() if line.startswith("rates "))
        assert row.split()[-1] == "10", row  # state rows

        s, b = await ahttp("PATCH", c.url(0) + f"/jobs/{jid}?mode=cancel")
        assert s == 202, b

        async def gone():  # its series went with it (bounded cardinality)
            s, job = await ahttp("GET", c.url(0) + f"/jobs/{jid}")
            return job["state"] in ("CANCELED", "FINISHED") and not await job_series(
                c.url(0), jid)
        await apoll(gone, 60, interval=0.5, what="the job ended and its series gone")
        # (the same Connect server: one JVM start for these too)
        await _a_connect_script(c, tmp_path)
        await _console_sink_note(c)

    lines = capfd.readouterr().out.splitlines()
    mine = [line for line in lines if line.startswith(f"[job={jid} attempt=1-0] ")]
    assert any(line.endswith("progress job started") for line in mine), lines[-20:]
    assert any(" batch 2 rows " in line for line in mine), mine[-10:]


async def test_listener_in_a_classic_application(tmp_path):
    """Application mode: the job process is the driver of its own Spark application; the
    listener is added to the session the job makes, called through py4j. The progress is
    in the replicated record: the other peer shows it too, but only the owner exports the
    job's series."""
    settings = {"spark.connect.embedded": False, "spark.master": "local[1]",
                "jobmanager.streaming.progress-interval": "1 s",
                "spark.conf.spark.sql.shuffle.partitions": 2,
                "spark.conf.spark.driver.memory": "512m"}
    async with running(str(tmp_path), 2, settings) as c:
        s, b = await ahttp("POST", c.url(0) + "/jobs", {
            "entry": "progress_jobs:rates", "pyfiles": [FIX], "job-type": "streaming",
            "spark-mode": "classic", "args": {"name": "classic-rates", "rate": 20}})
        assert s == 202, b
        jid = b["jobid"]

        async def owner():
            s, job = await ahttp("GET", c.url(0) + f"/jobs/{jid}")
            return job.get("node") if job.get("state") == "RUNNING" else None
        node = await apoll(owner, 60, what="the job running")
        mine = [p.node for p in c.peers].index(node)

        async def exported():
            got = await job_series(c.url(mine), jid)
            return got if got.get("jm_job_state_rows") and got["jm_job_state_rows"].value \
                else None
        got = await apoll(exported, 240, interval=0.5, what="a classic job's jm_job_* series")
        assert got["jm_job_up"].value == 1 and got["jm_job_state_rows"].value == 10
        assert not await job_series(c.url(1 - mine), jid)  # the other peer: none of them

        async def shown_elsewhere():  # the other peer's replica has the progress
            s, job = await ahttp("GET", c.url(1 - mine) + f"/jobs/{jid}")
            return job.get("progress")
        progress = await apoll(shown_elsewhere, 30, what="the progress on the other peer")
        assert [q["name"] for q in progress["queries"]] == ["classic-rates"]
        s, b = await ahttp("PATCH", c.url(0) + f"/jobs/{jid}?mode=cancel")
        assert s == 202, b

        async def ended():
            s, job = await ahttp("GET", c.url(0) + f"/jobs/{jid}")
            return job["state"] in ("CANCELED", "FINISHED")
        await apoll(ended, 60, interval=0.5, what="the classic job ended")



SCRIPT = """import os
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
q = (spark.readStream.format("rate").option("rowsPerSecond", 20).load().groupBy().count()
     .writeStream.queryName("script-rates").outputMode("complete").format("noop")
     .option("checkpointLocation", os.environ["JM_CHECKPOINT_DIR"] + "/script")
     .trigger(processingTime="1 second").start())
q.awaitTermination()
"""


async def _a_connect_script(c, tmp_path):
    """A spark-submit style script makes its own session on the peer's Connect server:
    the job process adds the listener to it once it is there."""
    script = tmp_path / "pipeline.py"
    script.write_text(SCRIPT)
    s, b = await ahttp("POST", c.url(0) + "/jobs", {"script": str(script),
                                                    "job-type": "streaming"})
    assert s == 202, b
    jid = b["jobid"]

    async def progressed():
        s, job = await ahttp("GET", c.url(0) + f"/jobs/{jid}")
        assert job["state"] not in ("FAILED", "FINISHED", "CANCELED"), job
        queries = (job.get("progress") or {}).get("queries") or []
        return queries if queries and (queries[0].get("batch") or 0) >= 1 else None
    queries = await apoll(progressed, 240, interval=0.5, what="the script's progress")
    assert [q["name"] for q in queries] == ["script-rates"]
    assert queries[0]["state-rows"] == 1  # one global count
    s, b = await ahttp("PATCH", c.url(0) + f"/jobs/{jid}?mode=cancel")
    assert s == 202, b

    async def ended():
        s, job = await ahttp("GET", c.url(0) + f"/jobs/{jid}")
        return job["state"] in ("CANCELED", "FINISHED")
    await apoll(ended, 60, interval=0.5, what="the script ended")


async def _console_sink_note(c):
    """Issue 32: a connect-mode streaming job's console sink prints in the peer's shared
    Spark Connect server, not in the job's process: the job's log says once, per query,
    where that output is (the peer's spark-connect.log), and it is there."""
    s, b = await ahttp("POST", c.url(0) + "/jobs", {
        "entry": "progress_jobs:console_rates", "pyfiles": [FIX], "job-type": "streaming",
        "args": {"name": "to_console"}})
    assert s == 202, b
    jid = b["jobid"]

    async def noted():
        s, b = await ahttp("GET", c.url(0) + f"/jobs/{jid}/logs")
        return b["text"] if s == 200 and "console sink" in b["text"] else None
    text = await apoll(noted, 240, interval=0.5, what="the job log's console-sink note")
    path = os.path.join(c.peers[0].ground.log_dir, "spark-connect.log")
    assert (f"[jm] query to_console writes to the console sink: in connect mode that "
            f"output is in the peer's Spark Connect log, {path}") in text, text

    def printed():  # the batches the console sink printed are in that file
        with open(path, errors="replace") as f:
            return re.search(r"^Batch: \d+$", f.read(), re.M)
    await apoll(printed, 60, interval=0.5, what="the console output in spark-connect.log")

    async def batches_later():  # more batches: the note stays one line per query
        s, job = await ahttp("GET", c.url(0) + f"/jobs/{jid}")
        queries = (job.get("progress") or {}).get("queries") or []
        return queries and (queries[0].get("batch") or 0) >= 3
    await apoll(batches_later, 120, interval=0.5, what="three more batches")
    s, b = await ahttp("GET", c.url(0) + f"/jobs/{jid}/logs")
    assert b["text"].count("writes to the console sink") == 1, b["text"]
    s, b = await ahttp("PATCH", c.url(0) + f"/jobs/{jid}?mode=cancel")
    assert s == 202, b

    async def ended():
        s, job = await ahttp("GET", c.url(0) + f"/jobs/{jid}")
        return job["state"] in ("CANCELED", "FINISHED")
    await apoll(ended, 120, interval=0.5, what="the job ended")
