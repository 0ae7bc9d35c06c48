"""jm/policy/jobs/runparams.py: a job process's parameters, typed and frozen, and their wire
form for the zygote's pipe (strict both ways)."""
from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import msgpack
import pytest

from jm.config import KEYS
from jm.configsections import SparkSettings
from jm.policy.jobs.runparams import (REQUIRED, AttemptPlace, RunParams, RunParamsError,
                                      attempt_params, cleanup_params, fence_interval)
from raft.jobspec import JobSpec

MINIMAL = {"job_id": "j", "attempt": 2, "node": "h:1", "log_path": "/l/a.log",
           "result_path": "/r/result.json", "error_path": "/r/error.json",
           "checkpoint_dir": "/c"}


def full() -> RunParams:
    """Every field set to something other than its default."""
    return RunParams(
        **MINIMAL, name="n", streaming=True, entry="m:f", sql="SELECT 1", script="/s.py",
        argv=("a", "b"), args={"k": [1, {"x": None}]}, pyfiles=("/p/", "/q.zip"),
        peer_files=("/q.zip",), shown_names=(("/q.zip", "deps.zip"),),
        python_env="/e/site", python_exec="/e/bin/python",
        executor_python="./jm-python/bin/python",
        restore_path="/sp", cleanup_session="s0", run_as="etl", memory=1 << 30, cpu=50,
        spark_mode="classic",
        spark_conf={"spark.a": "1"}, spark_defaults={"spark.b": "2"}, spark_master="local[1]",
        driver_host="h", spark_conf_dir="/conf", class_archive="/a.jsa",
        scratch_dir="/r/spark-local",
        spark_waiting_after=5.0, spark_remote="sc://h:1", session_id="s1",
        spark_ready_file="/ready", spark_wait=9.0, spark_log="/logs/spark-connect.log",
        spark_token="t0k",
        max_result_rows=7, max_result_size=99,
        max_failure_size=55, fence_interval=0.2)


def test_full_round_trip_through_the_wire_msgpack_and_json():
    p = full()
    defaults = RunParams(**MINIMAL)
    assert all(getattr(p, f.name) != getattr(defaults, f.name)
               for f in dataclasses.fields(RunParams) if f.name not in MINIMAL)
    wire = p.to_wire()
    assert set(wire) == {f.name for f in dataclasses.fields(RunParams)}
    assert wire["argv"] == ["a", "b"] and wire["spark_conf"] == {"spark.a": "1"}
    assert RunParams.from_wire(wire) == p
    assert RunParams.from_wire(json.loads(json.dumps(wire))) == p
    assert RunParams.from_wire(msgpack.unpackb(msgpack.packb(wire), raw=False)) == p


def test_every_optional_absent_gives_the_defaults_the_readers_used():
    p = RunParams.from_wire(dict(MINIMAL))
    assert set(REQUIRED) == set(MINIMAL)
    assert (p.name, p.entry, p.sql, p.script, p.restore_path, p.cleanup_session) == (None,) * 6
    assert (p.spark_master, p.driver_host, p.spark_conf_dir, p.scratch_dir) == (None,) * 4
    assert (p.spark_remote, p.session_id, p.spark_ready_file, p.spark_log) == (None,) * 4
    assert p.streaming is False and p.spark_mode == "connect"
    assert p.argv == () and p.pyfiles == () and dict(p.args) == {}
    assert dict(p.spark_conf) == {} and dict(p.spark_defaults) == {}
    assert (p.spark_waiting_after, p.spark_wait) == (30.0, 180.0)
    assert (p.max_result_rows, p.max_result_size, p.max_failure_size) == (1000, 262144, 16384)
    assert RunParams.from_wire(p.to_wire()) == p


@pytest.mark.parametrize("bad, why", [
    (dict(MINIMAL, cwd="/tmp"), "unknown run params: cwd"),
    (dict(MINIMAL, zz=1, aa=2), "unknown run params: aa, zz"),
    ({k: v for k, v in MINIMAL.items() if k != "job_id"}, "missing run params: job_id"),
    ({}, "missing run params: job_id, attempt, node"),
    (None, "must be a dict, not NoneType"),
    (dict(MINIMAL, attempt="x"), "bad run params"),
    (dict(MINIMAL, shown_names=[["/a"]]), "shown_names must be"),
    (dict(MINIMAL, shown_names=[["/a", 3]]), "shown_names must be"),
])
def test_from_wire_is_strict(bad, why):
    with pytest.raises(RunParamsError, match=why):
        RunParams.from_wire(bad)
    assert issubclass(RunParamsError, ValueError)


def test_frozen_and_immutable_inside():
    conf, argv = {"spark.a": "1"}, ["x"]
    p = RunParams(**MINIMAL, spark_conf=conf, argv=argv, args={"k": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.job_id = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        p.spark_conf["spark.a"] = "2"  # type: ignore[index]
    with pytest.raises(TypeError):
        p.args["k"] = 2  # type: ignore[index]
    conf["spark.a"], argv[0] = "changed", "changed"  # the caller's own stay theirs
    assert p.spark_conf["spark.a"] == "1" and p.argv == ("x",)


class _Conf(dict):
    spark_conf = {"spark.ui.port": "4050"}

    @property
    def spark(self):
        return SparkSettings.of(self)

    @property
    def timeouts(self):
        return SimpleNamespace(lease=self["jobmanager.lease-timeout"])


CONF = _Conf({**{k: v for k, (_, v) in KEYS.items() if k.startswith("spark.")},
              "spark.master": "spark://m:7077", "spark.executor-wait-warning": 30.0,
              "spark.connect.startup-timeout": 120.0, "sql.max-result-rows": 10,
              "jobmanager.result.max-size": 2048, "jobmanager.failure.max-size": 1024,
              "spark.connect.embedded": True, "spark.remote": None,
              "jobmanager.lease-timeout": 1.0, "spark.class-archive": "/spark.jsa"})


def test_attempt_params_from_a_spec_and_the_peer():
    spec = JobSpec.from_wire({"name": "wc", "entry": "m:main", "argv": ["1"],
                              "spark-mode": "classic", "spark-conf": {"spark.x": "y"},
                              "args": {"n": 3}, "savepoint-path": "/sp"})
    place = AttemptPlace("job1", 4, 2, "host:8081", "/w/jobs/job1/4-2", "/logs", "/ha/job1/cp",
                         "/confdir", "sc://h:15002", "/ready", "sess", ("/p/",), "/app.py")
    p = attempt_params(spec, CONF, place, streaming=True)
    assert p == RunParams(
        job_id="job1", attempt=4, node="host:8081", name="wc", streaming=True,
        entry="m:main", sql=None, script="/app.py", argv=("1",), spark_mode="classic",
        spark_conf={"spark.x": "y"}, spark_master="spark://m:7077",
        spark_defaults={"spark.ui.port": "4050"}, driver_host="host",
        spark_conf_dir="/confdir", class_archive="/spark.jsa", spark_waiting_after=30.0,
        args={"n": 3},
        pyfiles=("/p/",), log_path="/logs/jobs/job1/attempt-4-2.log",
        result_path="/w/jobs/job1/4-2/result.json", error_path="/w/jobs/job1/4-2/error.json",
        scratch_dir="/w/jobs/job1/4-2/spark-local", checkpoint_dir="/ha/job1/cp",
        restore_path="/sp", spark_remote="sc://h:15002", session_id="sess",
        spark_ready_file="/ready", spark_wait=120.0, spark_log="/logs/spark-connect.log",
        max_result_rows=10, max_result_size=2048, max_failure_size=1024,
        fence_interval=0.25)  # a quarter of the 1 s lease
    bare = attempt_params(JobSpec.from_wire({"sql": "SELECT 1"}), CONF, place,
                          streaming=False)
    assert bare.spark_mode == "connect" and bare.argv == () and dict(bare.args) == {}
    # the Connect server's output is in the peer's log dir only when the peer runs it
    for other in ({"spark.remote": "sc://elsewhere:15002"}, {"spark.connect.embedded": False}):
        assert attempt_params(spec, _Conf(CONF, **other), place, True).spark_log is None
    c = cleanup_params(p, "/w/jobs/job1/4-2", "sess")
    assert (c.entry, c.sql, c.cleanup_session) == (None, None, "sess")
    assert (c.script, c.pyfiles, c.peer_files) == (None, (), ())  # no code of the job's
    assert c.log_path == p.log_path + ".cleanup"
    assert (c.result_path, c.error_path) == ("/w/jobs/job1/4-2/cleanup.json",
                                             "/w/jobs/job1/4-2/cleanup-error.json")
    assert dataclasses.replace(c, entry=p.entry, sql=p.sql, cleanup_session=None,
                               script=p.script, pyfiles=p.pyfiles, peer_files=p.peer_files,
                               log_path=p.log_path, result_path=p.result_path,
                               error_path=p.error_path) == p


def test_a_job_looks_at_its_fences_within_a_quarter_of_the_lease_at_most_twice_a_second():
    assert fence_interval(2.0) == 0.5   # the default lease: twice a second
    assert fence_interval(30.0) == 0.5  # never rarer: a stop is seen within 0.5 s
    assert fence_interval(1.0) == 0.25  # a short lease: stopped well within it
