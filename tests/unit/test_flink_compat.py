"""Flink REST compatibility, the pure parts: rest/flink.py's decisions and the fields of
Flink's JobDetails in jm/wire/views.py (the Jackson deserializers of Flink's clients
need every one of them; read against Flink 2.3's classes)."""
from __future__ import annotations

import base64

import pytest

from jm.wire import flinkerror as E
from jm.wire import views as V
from raft import commands as c
from raft import state as S
from raft.state import ClusterState
from rest import flink as F
from jm.api import ApiError

# the bodies Flink 2.3's RestClusterClient sends (SavepointTriggerRequestBody,
# StopWithSavepointRequestBody): every field, nulls included
FLINK_SAVEPOINT = {"target-directory": "file:///sp", "cancel-job": False,
                   "formatType": "CANONICAL", "triggerId": None}
FLINK_STOP = {"targetDirectory": None, "drain": False, "formatType": "CANONICAL",
              "triggerId": None}


def test_v1_prefix_is_stripped_only_as_a_whole_segment():
    assert F.unprefixed("/v1/jobs/overview") == "/jobs/overview"
    assert F.unprefixed("/v1/config") == "/config"
    assert F.unprefixed("/v1") == "/"
    assert F.unprefixed("/v1x/jobs") is None
    assert F.unprefixed("/jobs") is None
    assert F.unprefixed("/v2/jobs") is None


@pytest.mark.parametrize("raw", [None, "cancel", "CANCEL", "Cancel", " cancel "])
def test_termination_mode_is_case_insensitive(raw):
    assert F.termination_mode(raw) == "cancel"


@pytest.mark.parametrize("raw,words", [("stop", "/stop"), ("STOP", "/stop"),
                                       ("kill", "mode=cancel"), ("", "mode=cancel")])
def test_other_termination_modes_are_a_400_that_says_what_to_use(raw, words):
    with pytest.raises(ApiError) as exc:
        F.termination_mode(raw)
    assert exc.value.status == 400 and words in exc.value.errors[0]


def test_flinks_own_savepoint_body_is_accepted():
    trigger, target, stop = F.savepoint_request(FLINK_SAVEPOINT, False)
    assert len(trigger) == 32 and int(trigger, 16) >= 0  # a Flink TriggerId: 32 hex digits
    # the target as given: the gateway makes it canonical (jm/policy/jobs/fsuri.py)
    assert (target, stop) == ("file:///sp", False)


def test_cancel_job_true_is_a_stop_with_savepoint():
    _, target, stop = F.savepoint_request({**FLINK_SAVEPOINT, "cancel-job": True}, False)
    assert stop is True and target == "file:///sp"


def test_flinks_own_stop_body_is_accepted():
    trigger, target, stop = F.savepoint_request(FLINK_STOP, True)
    assert target is None and stop is True and len(trigger) == 32
    _, target, _ = F.savepoint_request({**FLINK_STOP, "targetDirectory": "s3a://b/x"}, True)
    assert target == "s3a://b/x"


def test_given_trigger_id_and_format_in_any_case():
    trigger, _, _ = F.savepoint_request({"triggerId": "sp-1", "formatType": "native"}, False)
    assert trigger == "sp-1"


@pytest.mark.parametrize("body,stop,words", [
    ({"cancel-job": "yes"}, False, "cancel-job must be true or false"),
    ({"cancel-job": False}, True, "unknown field(s): cancel-job"),
    ({"drain": False}, False, "unknown field(s): drain"),
    ({"drain": True}, True, "drain=true"),
    ({"formatType": "ZIP"}, False, "formatType must be one of CANONICAL, NATIVE"),
    ({"triggerId": "a b"}, False, "triggerId"),
    ({"target-directory": ""}, False, "absolute path or a URI"),
    ({"targetDirectory": 7}, True, "targetDirectory must be an absolute path or a URI"),
    ({"bogus": 1}, False, "unknown field(s): bogus"),
    ([1], False, "JSON object"),
])
def test_bad_bodies_are_a_400_naming_the_problem(body, stop, words):
    with pytest.raises(ApiError) as exc:
        F.savepoint_request(body, stop)
    assert exc.value.status == 400
    assert any(words in e for e in exc.value.errors), exc.value.errors


def test_flink_clients_see_only_jobs_with_flink_job_ids():
    ids = ["a" * 32, "my-job", "A1" * 16, "a" * 33]
    assert [j for j in ids if F.JOB_ID_RE.match(j)] == ["a" * 32, "A1" * 16]


def test_dashboard_configuration_has_flinks_fields():
    out = F.dashboard_config("2.3.0", "abc", 3600, "CET")
    assert set(out) == {"refresh-interval", "timezone-name", "timezone-offset",
                        "flink-version", "flink-revision", "features"}
    assert out["timezone-offset"] == 3_600_000
    assert set(out["features"]) == {"web-submit", "web-cancel", "web-rescale", "web-history"}


# ---- views: Flink's JobDetails (GET /jobs/overview) ---------------------------------------
JOB_DETAILS = {"jid", "name", "jobType", "schedulerType", "start-time", "end-time",
               "duration", "state", "last-modification", "tasks", "pending-operators"}
EXECUTION_STATES = {"created", "scheduled", "deploying", "running", "finished", "canceling",
                    "canceled", "failed", "reconciling", "initializing"}
JOB_STATUSES = {"INITIALIZING", "CREATED", "RUNNING", "FAILING", "FAILED", "CANCELLING",
                "CANCELED", "FINISHED", "RESTARTING", "SUSPENDED", "RECONCILING"}


@pytest.fixture
def st():
    s = ClusterState()
    s.apply(c.RegisterPeer("n1", "h1", 8081, 6123, 11, 2, 1.0))
    s.apply(c.SubmitJob("a" * 32, {"name": "run", "slots": 1, "entry": "m:f",
                                   "job-type": "streaming"}, 10.0))
    s.apply(c.SubmitJob("b" * 32, {"name": "fin", "slots": 1, "entry": "m:f"}, 11.0))
    s.apply(c.AssignJobs((c.Assignment("a" * 32, "n1", 0), c.Assignment("b" * 32, "n1", 0)),
                         20.0))
    for jid, status, t in (("a" * 32, S.RUNNING, 21.0), ("b" * 32, S.RUNNING, 21.0),
                           ("b" * 32, S.FINISHED, 30.5)):
        res = s.apply(c.ReportStatuses((c.StatusReport(jid, 1, "n1", status, t),)))
        assert res.value[0].ok
    return s


def test_overview_rows_carry_every_field_of_flinks_job_details(st):
    rows = {r["jid"]: r for r in V.jobs_overview(st, 40.0)["jobs"]}
    for row in rows.values():
        assert JOB_DETAILS <= set(row)
        assert row["state"] in JOB_STATUSES
        assert set(row["tasks"]) == EXECUTION_STATES | {"total"}
        assert sum(v for k, v in row["tasks"].items() if k != "total") == row["tasks"]["total"]
        assert isinstance(row["pending-operators"], int)
    run, fin = rows["a" * 32], rows["b" * 32]
    assert run["tasks"]["running"] == 1 and fin["tasks"]["finished"] == 1
    assert run["jobType"] == "STREAMING" and fin["jobType"] == "BATCH"
    assert run["last-modification"] == 21_000 and fin["last-modification"] == 30_500


def test_cluster_overview_has_flinks_fields(st):
    out = V.overview(st, "n1")
    assert out["taskmanagers"] == 1 and out["flink-version"] == V.FLINK_REST_VERSION
    assert {"slots-total", "slots-available", "jobs-running", "jobs-finished",
            "jobs-cancelled", "jobs-failed", "flink-commit"} <= set(out)


# ---- a failure as Flink's clients read it (jm/wire/flinkerror.py) ---------------------
def test_java_strings_use_modified_utf8():
    assert E.java_string("ab") == b"\x74\x00\x02ab"
    assert E.modified_utf8("\0") == b"\xc0\x80"
    assert E.modified_utf8("é") == "é".encode()
    assert E.modified_utf8("\U0001F600") == b"\xed\xa0\xbd\xed\xb8\x80"  # two surrogates
    long = E.java_string("x" * 70000)
    assert long[:1] == b"\x7c" and int.from_bytes(long[1:9], "big") == 70000


def test_serialized_throwable_carries_the_three_strings_once():
    out = E.serialized_throwable("SavepointFailed", "disk full @C@", "the stack")
    assert out.startswith(b"\xac\xed\x00\x05")  # Java serialization's magic and version
    for text in ("disk full @C@", "SavepointFailed", "the stack"):
        assert out.count(E.java_string(text)) == 1
    for placeholder in E.PLACEHOLDERS.values():
        assert E.java_string(placeholder) not in out
    assert len(out) == len(E.TEMPLATE) + sum(
        len(E.java_string(t)) - len(E.java_string(p)) for t, p in
        zip(("disk full @C@", "SavepointFailed", "the stack"),
            (E.PLACEHOLDERS["message"], E.PLACEHOLDERS["class"], E.PLACEHOLDERS["stack"])))


def test_failed_savepoints_carry_a_serialized_throwable():
    st = ClusterState()
    st.apply(c.RegisterPeer("n1", "h1", 8081, 6123, 11, 2, 1.0))
    st.apply(c.SubmitJob("j", {"slots": 1, "entry": "m:f", "job-type": "streaming"}, 1.0))
    job = st.jobs["j"]
    sp = S.SavepointRecord("t1", False, None, 2.0, status=S.COMPLETED, completed=3.0,
                           failure="no space")
    job.savepoints["t1"] = sp
    cause = V.savepoint_status(job, "t1")["operation"]["failure-cause"]
    raw = base64.b64decode(cause["serialized-throwable"])
    assert E.java_string("no space") in raw and cause["stack-trace"] == "no space"
