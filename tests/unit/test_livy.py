"""jm.wire.livy: Livy batch requests as script job specs, batches as Livy objects."""
import pytest

from jm.wire import livy
from raft.records import AttemptRecord, JobRecord


def test_a_full_request_maps_onto_a_script_job():
    spec = livy.batch_spec({
        "file": "local:/apps/etl.py", "args": ["--day", 3], "pyFiles": ["file:///apps/lib.zip"],
        "name": "nightly", "conf": {"spark.sql.shuffle.partitions": "8"},
        "driverMemory": "2g", "numExecutors": 4, "jars": ["/jars/a.jar", "/jars/b.jar"]})
    assert spec == {"script": "/apps/etl.py", "argv": ["--day", "3"],
                    "pyfiles": ["/apps/lib.zip"], "name": "nightly",
                    "spark-conf": {"spark.sql.shuffle.partitions": "8",
                                   "spark.driver.memory": "2g",
                                   "spark.executor.instances": 4,
                                   "spark.jars": "/jars/a.jar,/jars/b.jar"}}
    assert livy.batch_spec({"file": "artifact:sha256:" + "a" * 64}) == {
        "script": "artifact:sha256:" + "a" * 64}


def test_remote_files_are_kept_canonical_for_the_peer_to_fetch():
    spec = livy.batch_spec({"file": "s3a://apps/jobs/etl.py",
                            "pyFiles": ["/lib/a.zip", "hdfs://nn:8020/lib/b.zip"]})
    assert spec == {"script": "s3://apps/jobs/etl.py",
                    "pyfiles": ["/lib/a.zip", "hdfs://nn:8020/lib/b.zip"]}
    with pytest.raises(ValueError) as e:
        livy.batch_spec({"file": "gs://Not_A_Bucket/etl.py"})
    assert "bucket" in e.value.args[0][0]


def test_bad_requests_name_every_problem():
    with pytest.raises(ValueError) as e:
        livy.batch_spec({"file": "ftp://nn/apps/etl.py", "className": "org.x.Main",
                         "proxyUser": "Bob!", "args": "x", "wat": 1,
                         "pyFiles": ["s3://b/lib.zip?versionId=2"]})
    errors = e.value.args[0]
    assert any("ftp://" in x and "artifact" in x for x in errors)
    assert any(x.startswith("pyFiles") and "query" in x for x in errors)
    assert any("className" in x for x in errors)
    assert any("args must be a list" in x for x in errors)
    assert any("unknown field(s): wat" in x for x in errors)
    with pytest.raises(ValueError):
        livy.batch_spec({"file": "relative.py"})
    with pytest.raises(ValueError):
        livy.batch_spec(["not", "an", "object"])


def test_states_and_the_batch_object():
    job = JobRecord("j1", "etl", {"script": "/a.py"}, 1.0)
    job.number = 7
    assert livy.batch(job)["state"] == "starting"
    for status, state in (("RUNNING", "running"), ("FINISHED", "success"),
                          ("FAILED", "dead"), ("CANCELED", "killed"),
                          ("RESTARTING", "recovering"), ("CANCELLING", "shutting_down")):
        job.status = status
        assert livy.batch(job)["state"] == state
    a = AttemptRecord(1, "n1", 2.0)
    a.spark = [{"spark-app-id": "app-1", "spark-ui": "http://ui"}]
    job.attempts.append(a)
    b = livy.batch(job, ["line"])
    assert (b["id"], b["appId"], b["appInfo"]["sparkUiUrl"], b["log"]) == (7, "app-1",
                                                                           "http://ui", ["line"])


def test_listing_and_log_pages():
    jobs = []
    for n in range(1, 6):
        j = JobRecord(f"j{n}", "x", {"script": "/a.py"} if n != 3 else {"entry": "m:f"}, 1.0)
        j.number = n
        jobs.append(j)
    out = livy.batches(jobs, 1, 2)
    assert out["total"] == 4 and [s["id"] for s in out["sessions"]] == [2, 4]
    text = "\n".join(f"l{i}" for i in range(150))
    assert livy.log_page(text, None, None) == (50, 150, [f"l{i}" for i in range(50, 150)])
    assert livy.log_page(text, 10, 2) == (10, 150, ["l10", "l11"])
    assert livy.log_page("", None, None) == (0, 0, [])


def test_a_batch_s_python_requirements_come_in_its_conf():
    spec = livy.batch_spec({"file": "/apps/etl.py", "conf": {
        "spark.jm.requirements": "tabulate==0.9.0\n# pinned\nsix", "spark.x": "1"}})
    assert spec["requirements"] == ["tabulate==0.9.0", "six"]
    assert spec["spark-conf"] == {"spark.x": "1"}  # (the key is ours, not Spark's)
    with pytest.raises(ValueError) as exc:
        livy.batch_spec({"file": "/apps/etl.py",
                         "conf": {"spark.jm.requirements": "-r other.txt"}})
    assert "spark.jm.requirements line 1: -r is not taken here" in exc.value.args[0][0]
