"""Unit tests of application mode's pure parts: the driver's spark-submit arguments and
properties, the waiting note, the info watcher, the attempt's Spark details in the
replicated state and its view, and jm run's command line."""
from __future__ import annotations

import argparse
import json
import shlex

import pytest

from jm.client.cli_http import UsageError
from jm.client.cli_run import build_run_spec, parse_conf, split_app_args
from jm.policy.jobs.runparams import RunParams
from jm.wire import views
from jm.runtime.sparkapp import (IdleSince, InfoWatcher, driver_conf, jvm_opts_env,
                                 local_dirs_env, submit_args, waiting)
from jm.runtime.sparkjvm import server_info
from raft import commands as c
from raft import state as S
from raft.state import ClusterState


# ---- the driver -------------------------------------------------------------------------
def test_submit_args_ship_code_files_only():
    args = submit_args("spark://m:7077", "my job", {"spark.b": "2", "spark.a": "x y"},
                       ["/a/helpers.py", "/a/lib.zip", "/a/dir/", "/a/x.egg"])
    assert args == ["--master", "spark://m:7077", "--name", "my job",
                    "--conf", "spark.a=x y", "--conf", "spark.b=2",
                    "--py-files", "/a/helpers.py,/a/lib.zip,/a/x.egg", "pyspark-shell"]
    # what the gateway launch reads back from PYSPARK_SUBMIT_ARGS
    assert shlex.split(shlex.join(args)) == args
    assert submit_args("local[1]", "n", {}, [])[-1] == "pyspark-shell"
    assert "--py-files" not in submit_args("local[1]", "n", {}, ["/d/"])


def test_driver_conf_layers_and_fencing_keys():
    params = _run("j1", 3, driver_host="10.0.0.5",
                  spark_defaults={"spark.ui.port": "4050", "spark.executor.memory": "1g"},
                  spark_conf={"spark.executor.memory": "2g", "spark.jm.job-id": "forged"})
    conf = driver_conf(params)
    assert conf["spark.executor.memory"] == "2g"          # the job's own wins
    assert conf["spark.ui.port"] == "4050"                # the cluster's default wins ours
    assert conf["spark.driver.host"] == "10.0.0.5"
    assert conf["spark.jm.job-id"] == "j1" and conf["spark.jm.attempt"] == "3"
    assert driver_conf(_run("j", 1))["spark.ui.showConsoleProgress"] == "false"
    assert driver_conf(_run("j", 1))["spark.driver.host"] == "127.0.0.1"


def _run(job_id: str, attempt: int, **fields) -> RunParams:
    return RunParams(job_id=job_id, attempt=attempt, node="n", log_path="/l",
                     result_path="/r", error_path="/e", checkpoint_dir="/c", **fields)


def test_waiting_note_only_for_a_cluster_app_without_executors():
    info = {"spark-app-id": "app-1", "master": "spark://m:7077", "executors": 0}
    assert waiting(info, 29.9, 30) == {}
    note = waiting(info, 31, 30)["waiting"]
    assert "no executor granted by spark://m:7077 for 30 s or more" in note
    assert waiting(info, 95, 30) == {"waiting": note}  # one note, not one per second
    assert waiting(dict(info, executors=2), 100, 30) == {}
    assert waiting({"spark-app-id": "local-1", "master": "local[2]"}, 100, 30) == {}


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_info_watcher_writes_changes_and_the_waiting_note(tmp_path):
    path = str(tmp_path / "spark.json")
    clock = Clock()
    current: dict = {"info": None}
    w = InfoWatcher(path, lambda: current["info"], waiting_after=30, clock=clock)
    w.poll()
    assert not (tmp_path / "spark.json").exists()       # no application yet
    current["info"] = {"spark-app-id": "app-1", "master": "spark://m", "executors": 0}
    w.poll()
    assert json.loads(open(path).read()) == current["info"]
    clock.t += 31
    w.poll()
    assert "waiting" in json.loads(open(path).read())
    current["info"] = dict(current["info"], executors=1)
    w.poll()
    assert "waiting" not in json.loads(open(path).read())
    clock.t += 100
    current["info"] = dict(current["info"], executors=0)  # its executors lost: 30 s anew
    w.poll()
    assert "waiting" not in json.loads(open(path).read())
    clock.t += 30
    w.poll()
    assert "waiting" in json.loads(open(path).read())
    current["info"] = {"spark-app-id": "app-2", "master": "spark://m", "executors": 0}
    clock.t += 10
    w.poll()  # a new application: its own 30 s
    assert json.loads(open(path).read())["spark-app-id"] == "app-2"
    assert "waiting" not in json.loads(open(path).read())

    def broken():
        raise RuntimeError("py4j gone")
    InfoWatcher(path, broken, 30).poll()  # a stopping driver is not an error


def test_idle_since_counts_from_the_first_poll_without_executors():
    idle = IdleSince()
    app = {"spark-app-id": "a", "master": "yarn", "executors": 0}
    assert idle.note(app, 10.0, 5) == {}
    assert idle.note(app, 14.9, 5) == {}
    assert "waiting" in idle.note(app, 15.0, 5)
    assert idle.note(dict(app, executors=3), 16.0, 5) == {}
    assert idle.note({"spark-app-id": "a", "master": "local[2]"}, 99.0, 5) == {}


def test_server_info_from_the_ui_rest_answers():
    apps = [{"id": "app-7", "name": "Spark Connect server"}]
    execs = [{"id": "driver"}, {"id": "0"}, {"id": "1"}]
    info = server_info("spark://m:7077", "http://127.0.0.1:4041", apps, execs)
    assert info == {"spark-app-id": "app-7", "spark-ui": "http://127.0.0.1:4041",
                    "master": "spark://m:7077", "executors": 2,
                    "shared": "the peer's Spark Connect server"}
    assert server_info("yarn", "u", apps, [{"id": "driver"}])["executors"] == 0
    assert server_info("yarn", "u", apps, None)["executors"] == 0  # not answered yet
    assert server_info("yarn", "u", [], execs) is None
    assert server_info("yarn", "u", {"error": 1}, execs) is None


# ---- the attempt's Spark details in the replicated state --------------------------------
@pytest.fixture
def running():
    st = ClusterState()
    st.apply(c.RegisterPeer("n1", "h", 8000, 9000, 1, 2, 1.0))
    st.apply(c.SubmitJob("j1", {"script": "/a.py", "slots": 1}, 2.0, ""))
    st.apply(c.AssignJobs((c.Assignment("j1", "n1", 0),), 3.0))
    report(st, c.StatusReport("j1", 1, "n1", S.RUNNING, 4.0))
    return st


def report(st, r):
    res = st.apply(c.ReportStatuses((r,)))
    assert res.ok
    return res.value[0]


def test_info_report_records_the_app_without_changing_the_status(running):
    job = running.jobs["j1"]
    running_since = job.timestamps[S.RUNNING]
    info = {"spark-app-id": "app-1", "spark-ui": "http://h:4040", "restart": 0}
    assert report(running, c.StatusReport("j1", 1, "n1", S.RUNNING, 9.0, info=info)).ok
    assert job.status == S.RUNNING and job.timestamps[S.RUNNING] == running_since
    assert job.attempts[-1].spark == [info]
    # the same restart's update replaces; a restart in place adds
    report(running, c.StatusReport("j1", 1, "n1", S.RUNNING, 9.5,
                                   info=dict(info, executors=2)))
    report(running, c.StatusReport("j1", 1, "n1", S.RUNNING, 10.0,
                                   info={"spark-app-id": "app-2", "restart": 1}))
    assert [a["spark-app-id"] for a in job.attempts[-1].spark] == ["app-1", "app-2"]
    assert job.attempts[-1].spark[0]["executors"] == 2
    view = views.job_detail(job, 11.0)["attempts"][-1]
    assert view["spark-app-id"] == "app-2" and len(view["spark-apps"]) == 2


def test_info_of_a_stale_attempt_is_refused(running):
    r = report(running, c.StatusReport("j1", 7, "n1", S.RUNNING, 9.0,
                                       info={"spark-app-id": "x", "restart": 0}))
    assert not r.ok and r.code == "stale"
    assert running.jobs["j1"].attempts[-1].spark is None


def test_junk_info_is_invalid_not_raised(running):
    r = report(running, c.StatusReport("j1", 1, "n1", S.RUNNING, 9.0, info=["x"]))
    assert not r.ok and r.code == "invalid"


def test_info_round_trips_through_the_codec():
    r = c.StatusReport("j1", 1, "n1", S.RUNNING, 9.0, info={"spark-app-id": "a"})
    assert c.decode(c.encode(c.ReportStatuses((r,)))).reports[0] == r


def test_waiting_note_in_the_view_and_the_exceptions(running):
    job = running.jobs["j1"]
    assert "spark-waiting" not in views.job_detail(job, 5.0)
    report(running, c.StatusReport("j1", 1, "n1", S.RUNNING, 9.0, info={
        "spark-app-id": "app-1", "restart": 0, "waiting": "no executor granted"}))
    report(running, c.StatusReport("j1", 1, "n1", S.RUNNING, 12.0, info={
        "spark-app-id": "app-1", "restart": 0, "waiting": "no executor granted",
        "executors": 0}))  # the same note again: it waits since the first
    detail = views.job_detail(job, 13.0)
    assert detail["attempts"][-1]["spark-waiting"] == "no executor granted"
    assert detail["spark-waiting"] == "no executor granted" and detail["state"] == S.RUNNING
    assert job.attempts[-1].spark[-1]["waiting-since"] == 9.0
    ex = views.job_exceptions(job)
    assert ex["root-exception"] == "SparkResourcesUnavailable: no executor granted"
    assert ex["timestamp"] == 9000
    assert ex["all-exceptions"][0]["failure"] is False
    assert ex["all-exceptions"][0]["spark-app-id"] == "app-1"
    # executors granted: the job no longer waits; the exception history keeps the wait
    report(running, c.StatusReport("j1", 1, "n1", S.RUNNING, 20.0, info={
        "spark-app-id": "app-1", "restart": 0, "executors": 1}))
    assert "spark-waiting" not in views.job_detail(job, 21.0)
    report(running, c.StatusReport("j1", 1, "n1", S.RUNNING, 22.0, info={
        "spark-app-id": "app-1", "restart": 0, "executors": 2}))
    ex = views.job_exceptions(job)
    assert ex["root-exception"] == "SparkResourcesUnavailable: no executor granted"
    assert ex["all-exceptions"][0]["resolved-at"] == 20000
    assert ex["all-exceptions"][0]["timestamp"] == 9000
    # a failure after a wait is the root exception of the ended job
    report(running, c.StatusReport("j1", 1, "n1", S.RUNNING, 30.0, info={
        "spark-app-id": "app-1", "restart": 0, "waiting": "no executor granted"}))
    report(running, c.StatusReport("j1", 1, "n1", S.FAILED, 40.0, failure={
        "exception": "ValueError: bad", "traceback": "", "final": True}))
    ex = views.job_exceptions(job)
    assert ex["root-exception"] == "ValueError: bad"
    assert [e["failure"] for e in ex["all-exceptions"]] == [True, False]
    assert "spark-waiting" not in views.job_detail(job, 41.0)


# ---- jm run's command line ---------------------------------------------------------------
def test_split_app_args():
    assert split_app_args(["in.json", "--wait", "out", "--conf", "spark.a=1",
                           "--py-files=h.py", "-v", "--", "--wait", "--name", "x"]) == (
        ["--wait", "--conf", "spark.a=1", "--py-files=h.py"],
        ["in.json", "out", "-v", "--wait", "--name", "x"])
    with pytest.raises(UsageError, match="--conf needs a value"):
        split_app_args(["--conf"])


def test_parse_conf():
    assert parse_conf(["spark.a=1", "spark.b=x=y"]) == {"spark.a": "1", "spark.b": "x=y"}
    with pytest.raises(UsageError, match="expected KEY=VALUE"):
        parse_conf(["spark.a"])


def ns(**kw):
    base = dict(app="/x/app.py", app_args=[], conf=[], py_files=[], name=None, mode=None,
                streaming=False, jobid=None, slots=None, restart_strategy=None,
                requirements=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_build_run_spec():
    spec = build_run_spec(ns(app_args=["a", "b"], conf=["spark.x=1"], mode="connect",
                             streaming=True, restart_strategy="none"))
    assert spec == {"argv": ["a", "b"], "spark-conf": {"spark.x": "1"}, "spark-mode": "connect",
                    "name": "app.py", "job-type": "streaming",
                    "restart-strategy": {"type": "none"}}
    with pytest.raises(UsageError, match="must be a .py file or a .zip"):
        build_run_spec(ns(app="/x/app.txt"))


def test_connect_server_takes_few_cores_of_a_cluster():
    from jm.runtime.sparkjvm import server_conf
    conf = server_conf("spark://m:7077", {"spark.a": "1"}, 1)
    assert conf["spark.a"] == "1" and conf["spark.cores.max"] == "1"
    assert server_conf("spark://m:7077", {"spark.cores.max": "4"}, 1)["spark.cores.max"] == "4"
    assert "spark.cores.max" not in server_conf("local[*]", {}, 1)
    assert "spark.cores.max" not in server_conf("yarn", {}, 0)


def test_connect_server_defaults_for_short_statements():
    from jm.runtime.sparkjvm import server_conf
    aqe = {"spark.sql.adaptive.enabled": "true",
           "spark.sql.adaptive.coalescePartitions.enabled": "true"}
    # twice the cores the server knows it has
    assert server_conf("local[2]", {}, 1, cpus=8) == {**aqe, "spark.sql.shuffle.partitions": "4"}
    assert server_conf("local", {}, 1, cpus=8)["spark.sql.shuffle.partitions"] == "2"
    assert server_conf("local[*]", {}, 1, cpus=8)["spark.sql.shuffle.partitions"] == "16"
    assert server_conf("local[3,2]", {}, 1, cpus=8)["spark.sql.shuffle.partitions"] == "6"
    assert server_conf("spark://m:7077", {}, 2, cpus=8)["spark.sql.shuffle.partitions"] == "4"
    # unknown cores (no cap on YARN or Kubernetes): Spark's own, adaptive execution coalesces
    assert server_conf("yarn", {}, 0, cpus=8) == aqe
    # the user's spark.conf.* wins
    conf = server_conf("local[2]", {"spark.sql.shuffle.partitions": "50",
                                    "spark.sql.adaptive.enabled": "false"}, 1, cpus=8)
    assert conf["spark.sql.shuffle.partitions"] == "50"
    assert conf["spark.sql.adaptive.enabled"] == "false"


def test_a_driver_the_peer_starts_keeps_its_scratch_in_a_folder_of_its_own():
    assert local_dirs_env({}, {}, "/data/jobs/j/1-0/spark-local") == \
        {"SPARK_LOCAL_DIRS": "/data/jobs/j/1-0/spark-local"}
    # the operator's choice stands: the environment, or spark.local.dir
    assert local_dirs_env({"SPARK_LOCAL_DIRS": "/fast"}, {}, "/x") == {}
    assert local_dirs_env({}, {"spark.local.dir": "/fast"}, "/x") == {}
    assert local_dirs_env({}, {}, None) == {}
    # and its java.io.tmpdir (Spark Connect's artifacts-<uuid> folders), unless chosen
    assert jvm_opts_env({}, "/s") == {"SPARK_SUBMIT_OPTS": "-Djava.io.tmpdir=/s"}
    assert jvm_opts_env({"SPARK_SUBMIT_OPTS": "-Dx=1"}, "/s") == {
        "SPARK_SUBMIT_OPTS": "-Dx=1 -Djava.io.tmpdir=/s"}
    assert jvm_opts_env({"SPARK_SUBMIT_OPTS": "-Djava.io.tmpdir=/big"}, "/s") == {}
    assert jvm_opts_env({}, None) == {}


def test_a_jvm_the_peer_starts_has_the_jars_alone_on_its_class_path():
    """Its log4j configuration as a file and the class-data archive: each unless the
    operator chose one."""
    assert jvm_opts_env({}, "/s", "/c/log4j2.properties", "/a.jsa") == {"SPARK_SUBMIT_OPTS": (
        "-Djava.io.tmpdir=/s -Dlog4j2.configurationFile=/c/log4j2.properties "
        "-XX:SharedArchiveFile=/a.jsa")}
    mine = "-XX:SharedArchiveFile=/mine.jsa -Dlog4j2.configurationFile=/my.xml"
    assert jvm_opts_env({"SPARK_SUBMIT_OPTS": mine}, None, "/c/l", "/a.jsa") == {}
    assert jvm_opts_env({}, None, None, None) == {}
    # a standalone daemon's variable, the same way
    assert jvm_opts_env({"SPARK_DAEMON_JAVA_OPTS": "-Dx=1"}, None, "/l", "/a.jsa",
                        var="SPARK_DAEMON_JAVA_OPTS") == {"SPARK_DAEMON_JAVA_OPTS": (
                            "-Dx=1 -Dlog4j2.configurationFile=/l -XX:SharedArchiveFile=/a.jsa")}
