"""Unit tests for jm/wire/views.py: read models over a ClusterState built through apply."""
from __future__ import annotations

import pytest

from jm.wire import views as V
from raft import commands as c
from raft import state as S
from raft.protocol import BASELINE, PROTOCOL
from raft.state import ClusterState


def rep(st, job, epoch, node, status, t, **kw):
    res = st.apply(c.ReportStatuses((c.StatusReport(job, epoch, node, status, t, **kw),)))
    assert res.value[0].ok, res.value[0]


@pytest.fixture
def st():
    """n1 (2 slots, leader), n2 (3 slots), n3 (1 slot, dead); jobs in every state."""
    s = ClusterState()
    s.apply(c.RegisterPeer("n1", "h1", 8081, 6123, 11, 2, 1.0))
    s.apply(c.RegisterPeer("n2", "h2", 8082, 6124, 12, 3, 1.5))
    s.apply(c.RegisterPeer("n3", "h3", 8083, 6125, 13, 1, 2.0))
    for i, name in enumerate(["run", "fin", "fail", "canc", "wait", "cing", "asg"]):
        s.apply(c.SubmitJob(name, {"name": f"job-{name}", "slots": 1, "entry": "m:f"},
                            10.0 + i))
    s.apply(c.AssignJobs((c.Assignment("run", "n1", 0), c.Assignment("fin", "n2", 0),
                          c.Assignment("fail", "n2", 0), c.Assignment("cing", "n1", 0),
                          c.Assignment("asg", "n2", 0)), 20.0))
    rep(s, "run", 1, "n1", S.RUNNING, 21.0)
    rep(s, "fin", 1, "n2", S.RUNNING, 21.0)
    rep(s, "fin", 1, "n2", S.FINISHED, 30.5, result={"rows": 42})
    rep(s, "fail", 1, "n2", S.RESTARTING, 22.0,
        failure={"exception": "ValueError: first", "traceback": "tb1"})
    rep(s, "fail", 1, "n2", S.FAILED, 23.0,
        failure={"exception": "KeyError: second", "traceback": "tb2", "final": True,
                 "reason": "restart strategy is none"})
    s.apply(c.CancelJob("canc", 24.0))
    rep(s, "cing", 1, "n1", S.RUNNING, 21.0)
    s.apply(c.CancelJob("cing", 25.0))
    s.apply(c.DeclarePeerDead("n3", 26.0))
    s.apply(c.AddArtifact("sha256:" + "a" * 64, "lib.zip", 99, "n1", 27.0))
    return s


def test_overview(st):
    assert V.overview(st, "n1") == {
        "leader": "n1", "peers": 3, "peers-alive": 2, "taskmanagers": 2,
        "flink-version": V.FLINK_REST_VERSION, "flink-commit": V.FLINK_COMMIT,
        "slots-total": 5, "slots-available": 2,   # run + cing on n1, asg on n2
        "jobs-running": 3,                        # run, cing (CANCELLING), asg (assigned)
        "jobs-waiting": 1,                        # wait
        "jobs-finished": 1, "jobs-failed": 1, "jobs-cancelled": 1, "protocol": PROTOCOL}


def test_overview_empty_and_no_leader():
    assert V.overview(ClusterState(), None) == {
        "leader": None, "peers": 0, "peers-alive": 0, "taskmanagers": 0,
        "flink-version": V.FLINK_REST_VERSION, "flink-commit": V.FLINK_COMMIT, "slots-total": 0,
        "slots-available": 0, "jobs-running": 0, "jobs-waiting": 0, "jobs-finished": 0,
        "jobs-failed": 0, "jobs-cancelled": 0, "protocol": BASELINE}


def test_nodes(st):
    out = V.nodes(st, "n2")["nodes"]
    assert [n["id"] for n in out] == ["n1", "n2", "n3"]
    assert out[0] == {"id": "n1", "host": "h1", "rest-port": 8081, "raft-port": 6123,
                      "pid": 11, "leader": False, "state": "ALIVE", "slots": 2,
                      "slots-used": 2, "jobs": ["run", "cing"], "job-count": 2,
                      "registered-at": 1000,
                      "declared-dead-at": -1, "weight": 2.0, "ready": True,
                      "raft-role": "follower", "drain-deadline": None, "disk-low": None,
                      "protocol": PROTOCOL, "missing-os-users": [],
                      "connect-endpoint": None}
    assert out[1]["leader"] is True and out[1]["raft-role"] == "leader"
    assert out[1]["jobs"] == ["asg"] and out[1]["slots-used"] == 1
    assert out[2]["state"] == "DEAD" and out[2]["declared-dead-at"] == 26000
    assert out[2]["jobs"] == [] and out[2]["slots-used"] == 0
    # a peer's heartbeat carries its free-space warning; the next one without clears it
    st.apply(c.Heartbeat("n2", 30.0, True, "/data: 1% free, below jobmanager.disk.min-free"))
    assert V.nodes(st, "n2")["nodes"][1]["disk-low"].startswith("/data: 1% free")
    st.apply(c.Heartbeat("n2", 31.0, True))
    assert V.nodes(st, "n2")["nodes"][1]["disk-low"] is None
    # and the tenants whose OS user its host lacks, until a heartbeat no longer names them
    st.apply(c.Heartbeat("n2", 32.0, True, "", ("etl",)))
    assert V.nodes(st, "n2")["nodes"][1]["missing-os-users"] == ["etl"]
    st.apply(c.Heartbeat("n2", 33.0, True))
    assert V.nodes(st, "n2")["nodes"][1]["missing-os-users"] == []
    # with the Raft members known: a peer that is not a voter is a non-voting member
    assert [n["raft-role"] for n in V.nodes(st, "n2", ["n1", "n2"])["nodes"]] == \
        ["follower", "leader", "non-voter"]
    assert [r["id"] for r in V.non_voters(st, ["n1", "n2"])] == ["n3"]
    # a tenant's caller: how many jobs each runs, and only its own tenant's ids
    assert [(n["jobs"], n["job-count"]) for n in V.nodes(st, "n2", tenant="t")["nodes"]] \
        == [([], 2), ([], 1), ([], 0)]


def test_jobs_pages_newest_first_with_filters(st):
    import contextlib
    import json
    from jm.cluster.api.joblists import JobLists
    from jm.api import ApiError
    lists = JobLists(lambda: contextlib.nullcontext(st), clock=lambda: 100.0)
    page = lists.jobs_page({"limit": "2"})
    assert [r["id"] for r in page["jobs"]] == ["asg", "cing"]
    assert page["jobs"][0]["status"] == "CREATED" and page["jobs"][0]["jid"] == "asg"
    assert (page["total"], page["next-offset"]) == (7, 2)
    last = lists.jobs_page({"limit": "2", "offset": "6"})
    assert [r["id"] for r in last["jobs"]] == ["run"] and last["next-offset"] is None
    ended = lists.jobs_page({"state": "failed,Canceled"})
    assert [r["id"] for r in ended["jobs"]] == ["canc", "fail"] and ended["total"] == 2
    assert [r["id"] for r in lists.jobs_page({"name": "JOB-F"})["jobs"]] == ["fail", "fin"]
    assert [r["id"] for r in lists.jobs_page({"node": "n1"})["jobs"]] == ["cing", "run"]
    since = lists.jobs_page({"since": "25000"})  # changed at or after 25 s
    assert {r["id"] for r in since["jobs"]} == {"cing", "fin"}
    for bad in ({"limit": "0"}, {"limit": "1001"}, {"offset": "-1"}, {"limit": "x"},
                {"state": "SLEEPING"}):
        with pytest.raises(ApiError) as exc:
            lists.jobs_page(bad)
        assert exc.value.status == 400
    # Flink's overview: complete by default, the same rows as the pure view
    import asyncio
    full = json.loads(b"".join(asyncio.run(lists.overview({}))))
    assert full == json.loads(json.dumps(V.jobs_overview(st, 100.0)))
    hexed = json.loads(b"".join(asyncio.run(lists.overview({"state": "RUNNING"},
                                                           lambda j: j == "run"))))
    assert [r["jid"] for r in hexed["jobs"]] == ["run"]


def test_jobs_overview_rows(st):
    rows = {r["jid"]: r for r in V.jobs_overview(st, now=100.0)["jobs"]}
    assert rows["run"] == {"jid": "run", "name": "job-run", "state": "RUNNING", "node": "n1",
                           "attempt": 1, "restarts": 0, "start-time": 10000, "end-time": -1,
                           "duration": 90000, "last-modification": 21000,
                           "tasks": V.tasks(st.jobs["run"]), "pending-operators": 0,
                           "jobType": "BATCH", "schedulerType": "Default"}
    assert rows["run"]["tasks"]["running"] == rows["run"]["tasks"]["total"] == 1
    assert rows["fin"]["node"] == "n2"          # last node kept after the end
    assert rows["fin"]["end-time"] == 30500
    assert rows["fin"]["duration"] == 19500     # 30.5 - 11.0
    assert rows["fail"]["restarts"] == 1
    assert rows["canc"]["node"] is None and rows["canc"]["attempt"] == 0
    assert rows["canc"]["duration"] == 11000    # 24.0 - 13.0


def test_job_detail(st):
    d = V.job_detail(st.jobs["fin"], now=100.0)
    assert d["spec"] == {"jobid": "fin", "name": "job-fin", "slots": 1, "entry": "m:f",
                         "args": {}, "pyfiles": [], "job-type": "batch",
                         "spark-mode": "connect"}  # (the defaults filled in)
    assert d["timestamps"] == {"CREATED": 11000, "RUNNING": 21000, "FINISHED": 30500}
    assert d["attempts"] == [{"attempt": 1, "node": "n2", "start-time": 20000,
                              "end-time": 30500, "end-reason": "finished"}]
    assert d["cancel-requested"] is False
    assert d["failures"] == 0
    assert d["result"] == {"rows": 42}
    assert d["state"] == "FINISHED"


def test_job_detail_cancelling(st):
    d = V.job_detail(st.jobs["cing"], now=100.0)
    assert d["state"] == "CANCELLING" and d["cancel-requested"] is True
    assert d["attempts"][0]["end-time"] == -1 and d["attempts"][0]["end-reason"] is None


def test_job_detail_after_peer_lost():
    s = ClusterState()
    s.apply(c.RegisterPeer("n1", "h", 1, 2, 3, 1, 0.0))
    s.apply(c.SubmitJob("j", {}, 1.0))
    s.apply(c.AssignJobs((c.Assignment("j", "n1", 0),), 2.0))
    s.apply(c.DeclarePeerDead("n1", 3.0))
    d = V.job_detail(s.jobs["j"], now=5.0)
    assert d["attempts"] == [{"attempt": 1, "node": "n1", "start-time": 2000,
                              "end-time": 3000, "end-reason": "peer-lost"}]
    assert d["node"] == "n1" and d["state"] == "CREATED"


def test_job_exceptions_newest_first(st):
    ex = V.job_exceptions(st.jobs["fail"])
    assert ex["root-exception"] == "KeyError: second"
    assert ex["timestamp"] == 23000
    assert ex["truncated"] is False
    assert ex["all-exceptions"] == [
        {"attempt": 1, "node": "n2", "timestamp": 23000, "exception": "KeyError: second",
         "stacktrace": "tb2", "final": True, "reason": "restart strategy is none",
         "failure": True},
        {"attempt": 1, "node": "n2", "timestamp": 22000, "exception": "ValueError: first",
         "stacktrace": "tb1", "final": False, "reason": None, "failure": True},
    ]


def test_job_exceptions_none(st):
    assert V.job_exceptions(st.jobs["run"]) == {"root-exception": None, "timestamp": None,
                                                "all-exceptions": [], "truncated": False}


def test_job_exceptions_truncated():
    s = ClusterState()
    s.apply(c.RegisterPeer("n1", "h", 1, 2, 3, 1, 0.0))
    s.apply(c.SubmitJob("j", {}, 1.0))
    s.apply(c.AssignJobs((c.Assignment("j", "n1", 0),), 2.0))
    for i in range(S.MAX_FAILURES_KEPT + 3):
        rep(s, "j", 1, "n1", S.RESTARTING, 3.0 + i, failure={"exception": f"E{i}"})
    ex = V.job_exceptions(s.jobs["j"])
    assert ex["truncated"] is True
    assert len(ex["all-exceptions"]) == S.MAX_FAILURES_KEPT
    assert ex["root-exception"] == f"E{S.MAX_FAILURES_KEPT + 2}"
    assert ex["all-exceptions"][-1]["exception"] == "E3"
    assert ex["all-exceptions"][0]["stacktrace"] == ""


@pytest.mark.parametrize("job,expected", [
    ("fin", {"status": {"id": "COMPLETED"}, "state": "FINISHED", "result": {"rows": 42}}),
    ("fail", {"status": {"id": "COMPLETED"}, "state": "FAILED", "failure": "KeyError: second"}),
    ("canc", {"status": {"id": "COMPLETED"}, "state": "CANCELED"}),
    ("run", {"status": {"id": "IN_PROGRESS"}, "state": "RUNNING"}),
    ("cing", {"status": {"id": "IN_PROGRESS"}, "state": "CANCELLING"}),
    ("wait", {"status": {"id": "IN_PROGRESS"}, "state": "CREATED"}),
])
def test_job_result(st, job, expected):
    assert V.job_result(st.jobs[job]) == expected


def test_artifacts(st):
    assert V.artifacts(st) == {"artifacts": [{"id": "sha256:" + "a" * 64, "name": "lib.zip",
                                              "size": 99, "nodes": ["n1"], "created": 27000,
                                              "tenants": []}]}


def test_views_do_not_mutate_state(st):
    import copy
    before = copy.deepcopy(vars(st))
    V.overview(st, "n1"), V.nodes(st, "n1"), V.jobs_overview(st, 1.0), V.artifacts(st)
    for j in st.jobs.values():
        V.job_detail(j, 1.0), V.job_exceptions(j), V.job_result(j)
    assert vars(st) == before


def test_peer_states_and_savepoint_views():
    from raft import commands as c
    st = ClusterState()
    st.apply(c.RegisterPeer("n1", "h", 1, 2, 3, 2, 1.0))
    st.apply(c.SubmitJob("s", {"job-type": "streaming"}, 1.0))
    st.apply(c.AssignJobs((c.Assignment("s", "n1", 0),), 2.0))
    st.apply(c.DrainPeer("n1", True, 3.0))
    assert V.nodes(st, None)["nodes"][0]["state"] == "DRAINING"
    st.apply(c.TriggerSavepoint("s", "t1", None, False, 4.0))
    assert V.savepoint_status(st.jobs["s"], "t1") == {
        "request-id": "t1", "status": {"id": "IN_PROGRESS"}, "stop": False,
        "trigger-time": 4000}
    st.apply(c.CompleteSavepoint("s", 1, "n1", "t1", None, "disk full", 5.0))
    out = V.savepoint_status(st.jobs["s"], "t1")
    cause = dict(out["operation"]["failure-cause"])
    assert cause.pop("serialized-throwable")  # Flink's clients' (tests/unit/test_flink_compat.py)
    assert out["operation"].keys() == {"failure-cause"}
    assert cause == {"class": "SavepointFailed", "stack-trace": "disk full"}
    st.apply(c.TriggerSavepoint("s", "t2", None, True, 6.0))
    st.apply(c.CompleteSavepoint("s", 1, "n1", "t2", "/sp/2", None, 7.0))
    assert V.savepoint_status(st.jobs["s"], "t2")["operation"] == {"location": "/sp/2"}
    assert V.job_savepoints(st.jobs["s"])["latest-location"] == "/sp/2"
    assert V.job_detail(st.jobs["s"], 8.0)["savepoint"] == "/sp/2"
    assert V.savepoint_status(st.jobs["s"], "t9") is None
    assert V.nodes(st, None)["nodes"][0]["state"] == "DRAINED"
    st.apply(c.DeclarePeerDead("n1", 9.0))
    assert V.nodes(st, None)["nodes"][0]["state"] == "DEAD"


def test_every_session_of_every_kind_with_its_tenant():
    from raft import commands as c
    from raft.state import ClusterState
    st = ClusterState()
    st.apply(c.RegisterPeer("n1", "10.0.0.7", 8081, 6123, 1, 4, 1.0, connect_port=15002))
    st.apply(c.RegisterPeer("n2", "::1", 8082, 6124, 2, 4, 1.0, connect_port=15003))
    st.apply(c.OpenSqlSession("h-sql", "mine", {}, "n1", 2.0, 0, "a", "ana"))
    st.apply(c.OpenLivySession("h-livy", "pyspark", "", {}, "n2", 3.0, 0, (), "b", "bo"))
    st.apply(c.OpenConnectSession("c-1", "n2", 4.0, "a", "ana", "ana-os"))
    out = V.sessions(st)
    assert [(r["kind"], r["id"], r["tenant"], r["node"]) for r in out["sessions"]] == [
        ("sql", "h-sql", "a", "n1"), ("livy", "0", "b", "n2"), ("connect", "c-1", "a", "n2")]
    assert out["sessions"][2]["endpoint"] == "sc://[::1]:15003"
    assert out["sessions"][2]["name"] == "ana-os" and out["total"] == 3
    assert [r["id"] for r in V.sessions(st, "a")["sessions"]] == ["h-sql", "c-1"]
    assert [r["id"] for r in V.sessions(st, kind="connect")["sessions"]] == ["c-1"]
    assert V.nodes(st, None)["nodes"][0]["connect-endpoint"] == "sc://10.0.0.7:15002"
    assert V.connect_endpoint("h", 0) is None
