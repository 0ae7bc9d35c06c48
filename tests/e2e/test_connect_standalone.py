"""The peers' own Spark Connect servers on a real Spark standalone cluster (a Master and
one Worker with 2 cores, from pyspark's own distribution), peers started with bin/
scripts: SQL jobs finish on every peer (each server is its own Spark application and
takes one core, so neither starves the other), and when the cluster has no executor
for a server, the jobs running on it say so (job state, exceptions, `jm status`) until
the executors come back, then finish."""
import subprocess
import sys

import pytest

from jm.local.standalone import StandaloneCluster
from tests.e2e.procs import ProcessCluster, assert_gone, started
from tests.helpers import CLASS_ARCHIVE, EXECUTOR_JVM, ROOT, http, poll

pytestmark = pytest.mark.slow
from jm.policy.jobs.vocab import TERMINAL  # the states a job ends in
SQL = "SELECT count(*) AS n FROM range(100000)"


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    sa = StandaloneCluster(str(tmp_path_factory.mktemp("standalone")), workers=1, cores=2,
                           memory="1g", class_archive=CLASS_ARCHIVE)
    try:
        sa.start(timeout=180)
        yield sa
    finally:
        pids = sa.pids()
        sa.stop()
        assert_gone(pids, "Spark daemons")


@pytest.fixture(scope="module")
def cluster(spark, tmp_path_factory):
    c = ProcessCluster(str(tmp_path_factory.mktemp("connect-standalone")), 2, {
        "spark.master": spark.master_url, "spark.connect.embedded": True,
        "spark.driver.memory": "512m", "spark.executor-wait-warning": "2 s",
        "spark.conf.spark.executor.memory": "512m",
        "spark.conf.spark.executor.extraJavaOptions": EXECUTOR_JVM,
        "spark.conf.spark.sql.shuffle.partitions": 2})
    with started(c, spark=True):
        yield c


def job(c, jid, peer=0):
    s, b = http("GET", f"{c.urls[peer]}/jobs/{jid}")
    assert s == 200, b
    return b


def ended(c, jid, timeout=240):
    return poll(lambda: (lambda j: j if j["state"] in TERMINAL else None)(job(c, jid)),
                timeout, interval=0.3, what=f"job {jid} ended")


def exceptions(c, jid):
    return http("GET", f"{c.urls[0]}/jobs/{jid}/exceptions")[1]


def servers(spark):
    return [a for a in spark.active_apps() if a["id"].startswith("app-")]


def test_sql_jobs_finish_on_every_peer_and_the_servers_share_the_cores(cluster, spark):
    apps = poll(lambda: (lambda a: a if len(a) == 2 else None)(servers(spark)), 60,
                what="both peers' Connect servers registered at the master")
    assert sorted(a["cores"] for a in apps) == [1, 1], apps  # spark.connect.cores each
    ids = []
    for i in range(4):
        s, b = http("POST", cluster.urls[i % 2] + "/jobs", {"sql": SQL, "name": f"count-{i}"})
        assert s == 202, b
        ids.append(b["jobid"])
    nodes = set()
    for jid in ids:
        done = ended(cluster, jid)
        assert done["state"] == "FINISHED", exceptions(cluster, jid)
        assert done["result"]["rows"] == [[100000]], done["result"]
        assert "spark-waiting" not in done
        nodes.add(done["node"])
    live = {n["id"] for n in http("GET", cluster.urls[0] + "/nodes")[1]["nodes"]}
    assert nodes <= live


def test_a_job_says_it_waits_for_executors_until_they_come(cluster, spark):
    spark.kill_worker(0)  # a lost Spark host: no executor left for either server
    try:
        spark.wait(lambda: spark.alive_workers() == 0, 60, "the worker declared lost")
        s, b = http("POST", cluster.urls[0] + "/jobs", {"sql": SQL, "name": "starved"})
        assert s == 202, b
        jid = b["jobid"]
        waiting = poll(lambda: (lambda j: j if j.get("spark-waiting") else None)(
            job(cluster, jid, peer=1)), 120, interval=0.3, what="the job's waiting note")
        assert waiting["state"] == "RUNNING"
        assert "no executor granted by " + spark.master_url in waiting["spark-waiting"]
        attempt = waiting["attempts"][-1]
        assert attempt["spark-app-id"] in {a["id"] for a in servers(spark)}, attempt
        ex = exceptions(cluster, jid)
        assert ex["root-exception"].startswith("SparkResourcesUnavailable: "), ex
        r = subprocess.run([sys.executable, "-m", "jm.client.cli", "status", jid], cwd=ROOT,
                           env=cluster.env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "waiting for Spark resources" in r.stdout, r.stdout
    finally:
        spark.start_worker(0)
    spark.wait(lambda: spark.alive_workers() == 1, 120, "the worker back")
    done = ended(cluster, jid)
    assert done["state"] == "FINISHED", exceptions(cluster, jid)
    assert done["result"]["rows"] == [[100000]]
    ex = exceptions(cluster, jid)
    assert ex["root-exception"] is None, ex  # it finished: no failure
    assert [e["exception"].split(":")[0] for e in ex["all-exceptions"]] == [
        "SparkResourcesUnavailable"], ex  # the wait stays in its history
    assert ex["all-exceptions"][0]["failure"] is False
