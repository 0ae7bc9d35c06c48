"""Unit tests for jm/policy/jobs/spec.py: validation and normalisation of submitted job specs."""
from __future__ import annotations

import re

import pytest

from jm.policy.jobs.spec import JOBID_RE, SpecError, new_job_id, remote_refs, validate_spec

GOOD_ART = "artifact:sha256:" + "0123456789abcdef" * 4


def errors_of(spec, **kw):
    with pytest.raises(SpecError) as e:
        validate_spec(spec, **kw)
    assert isinstance(e.value, ValueError)
    assert str(e.value) == "; ".join(e.value.errors)
    return e.value.errors


def one_error(spec, pattern, **kw):
    errs = errors_of(spec, **kw)
    assert len(errs) == 1, errs
    assert re.search(pattern, errs[0]), errs[0]


# ---- normalisation --------------------------------------------------------------------------
def test_minimal_entry_spec_normalised():
    out = validate_spec({"entry": "pipelines.clicks:main"})
    assert re.fullmatch(r"[0-9a-f]{32}", out["jobid"])
    assert out == {"entry": "pipelines.clicks:main", "jobid": out["jobid"], "slots": 1,
                   "args": {}, "pyfiles": [], "name": "pipelines.clicks:main",
                   "job-type": "batch", "spark-mode": "connect"}


def test_minimal_sql_spec_named_sql():
    out = validate_spec({"sql": "SELECT 1", "jobid": "q1"})
    assert out == {"sql": "SELECT 1", "jobid": "q1", "slots": 1, "args": {}, "pyfiles": [],
                   "name": "sql", "job-type": "batch", "spark-mode": "connect"}


def test_full_spec_kept_and_nones_dropped():
    spec = {"name": "clicks", "entry": "m:f", "pyfiles": [GOOD_ART, "/shared/p.zip", "/x.py",
                                                          "/lib.egg", "/dir/"],
            "args": {"a": 1}, "sql": None, "jobid": "My_job-1", "slots": 3,
            "restart-strategy": {"type": "FixedDelay", "attempts": 2},
            "savepoint-path": None}
    out = validate_spec(spec)
    assert out == {"name": "clicks", "entry": "m:f",
                   "pyfiles": [GOOD_ART, "/shared/p.zip", "/x.py", "/lib.egg", "/dir/"],
                   "args": {"a": 1}, "jobid": "My_job-1", "slots": 3,
                   "restart-strategy": {"type": "fixed-delay", "attempts": 2},
                   "job-type": "batch", "spark-mode": "connect"}
    assert spec["restart-strategy"] == {"type": "FixedDelay", "attempts": 2}  # not mutated


def test_new_job_ids_are_unique_and_valid():
    ids = {new_job_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(JOBID_RE.match(i) for i in ids)


def test_generated_jobid_when_null():
    out = validate_spec({"entry": "m:f", "jobid": None})
    assert len(out["jobid"]) == 32


def test_savepoint_path_kept():
    out = validate_spec({"entry": "m:f", "savepoint-path": "/sp/1", "job-type": "streaming"})
    assert out["savepoint-path"] == "/sp/1" and out["job-type"] == "streaming"


@pytest.mark.parametrize("jobid", ["a", "A" * 64, "0-_x", "job_1"])
def test_good_jobids(jobid):
    assert validate_spec({"entry": "m:f", "jobid": jobid})["jobid"] == jobid


@pytest.mark.parametrize("entry", ["m:f", "a.b.c:main", "_p._q:_r", "pkg2.mod3:run_1"])
def test_good_entries(entry):
    assert validate_spec({"entry": entry})["entry"] == entry


def test_max_slots():
    assert validate_spec({"entry": "m:f", "slots": 4}, max_slots=4)["slots"] == 4
    one_error({"entry": "m:f", "slots": 5}, r"slots must be at most 4", max_slots=4)


# ---- errors -----------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", [None, [], "m:f", 3, ("entry", "m:f")])
def test_spec_not_object(spec):
    assert errors_of(spec) == ["the job spec must be a JSON object"]


def test_unknown_fields_listed_sorted():
    one_error({"entry": "m:f", "zeta": 1, "alpha": 2}, r"^unknown field\(s\): alpha, zeta$")


@pytest.mark.parametrize("spec", [{}, {"entry": "m:f", "sql": "SELECT 1"},
                                  {"entry": None, "sql": None}])
def test_exactly_one_of_entry_and_sql(spec):
    one_error(spec, r"exactly one of 'entry'")


@pytest.mark.parametrize("entry", ["m", "m:", ":f", "m:f:g", "1m:f", "m.:f", "m:f()",
                                   "a-b:c", "m: f", "", 5, ["m:f"]])
def test_bad_entry(entry):
    one_error({"entry": entry}, r"entry must look like")


@pytest.mark.parametrize("sql", ["", "   ", 5, ["SELECT 1"]])
def test_bad_sql(sql):
    one_error({"sql": sql}, r"sql must be a non-empty string")


@pytest.mark.parametrize("name", ["", "  ", 5, "x" * 201, ["n"]])
def test_bad_name(name):
    one_error({"entry": "m:f", "name": name}, r"name must be a non-empty string of at most 200")


def test_name_200_chars_ok():
    assert validate_spec({"entry": "m:f", "name": "x" * 200})["name"] == "x" * 200


@pytest.mark.parametrize("jobid", ["../x", "", "a" * 65, "-abc", "_abc", "a b", "a/b", "a.b",
                                   "é", 5, True, ["a"]])
def test_bad_jobid(jobid):
    one_error({"entry": "m:f", "jobid": jobid}, r"jobid must be 1-64 letters")


@pytest.mark.parametrize("spec,pattern", [
    ({"entry": "m:f", "jobid": "abc\n"}, r"^jobid must be 1-64 letters"),
    ({"entry": "m:f\n"}, r"^entry must look like"),
    ({"entry": "m:f", "pyfiles": [GOOD_ART + "\n"]}, r"^pyfiles: .*\\n' is not artifact:sha256:"),
], ids=["jobid", "entry", "artifact"])
def test_trailing_newline_rejected(spec, pattern):
    """`$` in a Python regex also matches before a final newline: each field says so."""
    one_error(spec, pattern)


@pytest.mark.parametrize("slots", [0, -1, True, False, 1.0, 2.5, "2", None, [1]])
def test_bad_slots(slots):
    one_error({"entry": "m:f", "slots": slots}, r"slots must be an integer >= 1")


@pytest.mark.parametrize("pyfiles,pattern", [
    ("/x.py", r"pyfiles must be a list of strings"),
    ([1], r"pyfiles must be a list of strings"),
    (["/x.py", None], r"pyfiles must be a list of strings"),
    ({"a": "/x.py"}, r"pyfiles must be a list of strings"),
    (["rel/x.py"], r"must be an absolute path"),
    (["x.zip"], r"must be an absolute path"),
    (["/x.txt"], r"must be a \.py, \.zip or \.egg file or a directory/"),
    (["/x"], r"must be a \.py, \.zip or \.egg file"),
    (["artifact:3f9c"], r"is not artifact:sha256:<64 hex digits>"),
    (["artifact:sha256:" + "A" * 64], r"is not artifact:sha256"),
    (["artifact:sha256:" + "0" * 63], r"is not artifact:sha256"),
])
def test_bad_pyfiles(pyfiles, pattern):
    one_error({"entry": "m:f", "pyfiles": pyfiles}, pattern)


def test_each_bad_pyfile_reported():
    errs = errors_of({"entry": "m:f", "pyfiles": ["a.py", "/b.txt", GOOD_ART]})
    assert len(errs) == 2
    assert "'a.py'" in errs[0] and "'/b.txt'" in errs[1]


@pytest.mark.parametrize("args", [[], "a=1", 5])
def test_bad_args(args):
    one_error({"entry": "m:f", "args": args}, r"args must be a JSON object")


def test_bad_savepoint_path():
    one_error({"entry": "m:f", "savepoint-path": 5, "job-type": "streaming"},
              r"savepoint-path must be an absolute path")
    one_error({"entry": "m:f", "savepoint-path": "rel/sp", "job-type": "streaming"},
              r"savepoint-path must be an absolute path")
    one_error({"entry": "m:f", "savepoint-path": "ftp://h/sp", "job-type": "streaming"},
              r"savepoint-path 'ftp://h/sp': the ftp:// scheme is not a file system")


def test_savepoint_path_is_stored_canonical():
    spec = validate_spec({"entry": "m:f", "job-type": "streaming",
                          "savepoint-path": "s3a://bucket/sp/savepoint-1/"})
    assert spec["savepoint-path"] == "s3://bucket/sp/savepoint-1"
    spec = validate_spec({"entry": "m:f", "job-type": "streaming",
                          "savepoint-path": "file:///sp/savepoint-1"})
    assert spec["savepoint-path"] == "/sp/savepoint-1"
    one_error({"entry": "m:f", "savepoint-path": "/sp"}, r"needs \"job-type\": \"streaming\"")


def test_remote_code_is_stored_canonical_and_listed_for_the_peer_to_copy():
    spec = validate_spec({"script": "s3a://apps/etl/main.py",
                          "pyfiles": ["/lib/", "gcs://apps/lib/dep.zip", "artifact:sha256:"
                                      + "a" * 64]})
    assert spec["script"] == "s3://apps/etl/main.py" and spec["name"] == "main.py"
    assert spec["pyfiles"] == ["/lib/", "gs://apps/lib/dep.zip", "artifact:sha256:" + "a" * 64]
    assert remote_refs(spec) == [("script", "s3://apps/etl/main.py"),
                                 ("pyfiles", "gs://apps/lib/dep.zip")]
    assert remote_refs(validate_spec({"entry": "m:f", "pyfiles": ["/lib/"]})) == []
    one_error({"script": "hdfs://nn:8020/apps/main.jar"}, r"script: .* must be a \.py file")
    one_error({"entry": "m:f", "pyfiles": ["s3://apps/lib/"]}, r"pyfiles: .* \.egg file'?$")
    one_error({"script": "s3://Bad_Bucket/main.py"}, r"needs a bucket name")
    one_error({"script": "ftp://h/main.py"}, r"absolute path every peer can read, a URI")


def test_job_type():
    one_error({"entry": "m:f", "job-type": "stream"}, r"job-type must be 'batch'")
    one_error({"sql": "SELECT 1", "job-type": "streaming"}, r"SQL job is a batch job")
    assert validate_spec({"entry": "m:f", "job-type": "streaming"})["job-type"] == "streaming"


@pytest.mark.parametrize("rs,pattern", [
    ("fixed-delay", r"must be an object"),
    ({"type": "often"}, r"restart-strategy.type must be one of"),
    ({"type": "fixed-delay", "tries": 3}, r"unknown option 'tries'"),
    ({"type": "fixed-delay", "attempts": -2}, r"restart-strategy.attempts"),
])
def test_bad_restart_strategy(rs, pattern):
    one_error({"entry": "m:f", "restart-strategy": rs}, pattern)


def test_every_problem_reported_at_once():
    errs = errors_of({"entry": "bad", "sql": "x", "jobid": "../x", "slots": 0, "args": [],
                      "pyfiles": "x", "savepoint-path": 1, "name": "", "extra": 1,
                      "restart-strategy": {"type": "?"}})
    assert len(errs) == 10


# ---- script jobs (application mode) ---------------------------------------------------------
def test_script_spec_normalised_classic_by_default():
    out = validate_spec({"script": "/apps/etl.py", "argv": ["in", "--out", "x"],
                         "spark-conf": {"spark.executor.memory": "2g", "spark.x.flag": True,
                                        "spark.sql.shuffle.partitions": 4}})
    assert out["spark-mode"] == "classic" and out["name"] == "etl.py"
    assert out["argv"] == ["in", "--out", "x"]
    assert out["spark-conf"] == {"spark.executor.memory": "2g", "spark.x.flag": "true",
                                 "spark.sql.shuffle.partitions": "4"}
    art = validate_spec({"script": GOOD_ART, "spark-mode": "connect"})
    assert art["argv"] == [] and art["spark-mode"] == "connect" and art["name"] == "script"
    assert validate_spec({"script": "/a/app.zip"})["name"] == "app.zip"


def test_entry_and_sql_may_ask_for_classic():
    assert validate_spec({"entry": "m:f", "spark-mode": "classic"})["spark-mode"] == "classic"
    assert validate_spec({"sql": "SELECT 1", "spark-mode": "classic"})["spark-mode"] == "classic"


def test_streaming_script_allowed():
    assert validate_spec({"script": "/a.py", "job-type": "streaming"})["job-type"] == "streaming"


@pytest.mark.parametrize("spec,pattern", [
    ({"script": "/a.py", "entry": "m:f"}, "exactly one of"),
    ({"script": "/a.py", "sql": "SELECT 1"}, "exactly one of"),
    ({"script": "/a.txt"}, "must be a .py file or a .zip"),
    ({"script": "a.py"}, "absolute path"),
    ({"script": ""}, "script must be a string"),
    ({"script": 5}, "script must be a string"),
    ({"script": "artifact:sha256:abc"}, "not artifact:sha256:<64 hex"),
    ({"script": "/a.py", "argv": "x y"}, "argv must be a list of strings"),
    ({"script": "/a.py", "argv": ["x", 1]}, "argv must be a list of strings"),
    ({"entry": "m:f", "argv": ["x"]}, "argv is for script jobs"),
    ({"script": "/a.py", "spark-mode": "yarn"}, "spark-mode must be one of classic, connect"),
    ({"script": "/a.py", "spark-conf": ["a"]}, "spark-conf must be an object"),
    ({"script": "/a.py", "spark-conf": {"executor.memory": "1g"}}, "not a Spark property"),
    ({"script": "/a.py", "spark-conf": {"spark.master": "local"}}, "spark.master is set by the "
     "cluster"),
    ({"script": "/a.py", "spark-conf": {"spark.submit.deployMode": "cluster"}},
     "spark.submit.deployMode is set by the cluster"),
    ({"script": "/a.py", "spark-conf": {"spark.jm.job-id": "x"}}, "spark.jm.job-id is set"),
    ({"script": "/a.py", "spark-conf": {"spark.a": None}}, "must be a string, number"),
    ({"script": "/a.py", "spark-conf": {"spark.a": {"b": 1}}}, "must be a string, number"),
])
def test_bad_script_specs(spec, pattern):
    one_error(spec, pattern)


def test_every_script_problem_listed():
    errs = errors_of({"script": "rel.txt", "argv": [1], "spark-mode": "x",
                      "spark-conf": {"spark.master": "y", "spark.remote": "z", "foo": 1}})
    assert len(errs) == 6, errs
