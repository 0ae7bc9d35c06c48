"""Unit tests for raft/state.py: ClusterState.apply for every command."""
from __future__ import annotations

import pytest

from raft import commands as c
from raft import state as S
from raft.state import ClusterState, Result


# ---- helpers ----------------------------------------------------------------------------
def reg(st, node, slots=2, time=1.0, pid=100):
    return st.apply(c.RegisterPeer(node, "h-" + node, 8000, 9000, pid, slots, time))


def submit(st, job_id, slots=1, time=2.0, request_id="", **spec):
    spec = dict(spec, slots=slots)
    return st.apply(c.SubmitJob(job_id, spec, time, request_id))


def assign(st, *triples, time=3.0):
    return st.apply(c.AssignJobs(tuple(c.Assignment(j, n, e) for j, n, e in triples), time))


def report(st, job_id, epoch, node, status, time=4.0, result=None, failure=None):
    res = st.apply(c.ReportStatuses((c.StatusReport(job_id, epoch, node, status, time,
                                                    result, failure),)))
    assert res.ok
    return res.value[0]


@pytest.fixture
def st():
    s = ClusterState()
    reg(s, "n1", slots=2)
    reg(s, "n2", slots=3)
    return s


@pytest.fixture
def running(st):
    """job j1 assigned to n1 at epoch 1 and RUNNING."""
    submit(st, "j1")
    assert assign(st, ("j1", "n1", 0)).value == {"assigned": [("j1", 1)], "refused": []}
    assert report(st, "j1", 1, "n1", S.RUNNING, time=5.0).ok
    return st


# ---- Result ----------------------------------------------------------------------------
def test_result_fail():
    r = Result.fail("conflict", "nope")
    assert (r.ok, r.value, r.error, r.code) == (False, None, "nope", "conflict")


# ---- generic apply -----------------------------------------------------------------------
@pytest.mark.parametrize("junk", [None, 42, "Heartbeat", {"op": "x"}, c.Assignment("j", "n", 0),
                                  object()])
def test_unknown_command_is_invalid_not_raised(junk):
    st = ClusterState()
    r = st.apply(junk)
    assert not r.ok and r.code == "invalid"
    assert "unknown command" in r.error
    assert st.applied == 0


@pytest.mark.parametrize("cmd", [
    c.SubmitJob("j", None, 1.0),                         # spec not a dict
    c.SubmitJob("j", ["slots", 1], 1.0),
    c.AssignJobs(None, 1.0),
    c.AssignJobs((1, 2), 1.0),
    c.ReportStatuses(None),
    c.Heartbeat(["unhashable"], 1.0),
    c.CancelJob({"unhashable": 1}, 1.0),
    c.DeclarePeerDead([], 1.0),
    c.AddArtifact([], "x", 1, "n", 1.0),
])
def test_junk_fields_give_invalid_result_never_raise(cmd):
    st = ClusterState()
    reg(st, "n1")
    r = st.apply(cmd)
    assert isinstance(r, Result)
    assert r.ok is False
    assert r.code in ("invalid", "not-found")


@pytest.mark.parametrize("cmd", [
    c.RegisterPeer(None, None, None, None, None, None, None),
    c.RegisterPeer("n9", "h", "x", "y", "z", "many", "now"),
    c.StatusReport("j", 1, "n", "RUNNING", 1.0),     # not a top-level command for apply
    c.SubmitJob("j", {"slots": "lots"}, 1.0),
])
def test_more_junk_never_raises(cmd):
    st = ClusterState()
    reg(st, "n1")
    r = st.apply(cmd)
    assert isinstance(r, Result)
    # and the state keeps working afterwards
    assert st.apply(c.Heartbeat("n1", 9.0)).ok


def test_job_with_junk_slots_is_refused_not_raised():
    st = ClusterState()
    reg(st, "n1")
    r = st.apply(c.SubmitJob("j", {"slots": "lots"}, 1.0))
    assert not r.ok and r.code == "invalid" and "slots must be of type int" in r.error
    assert "j" not in st.jobs and st.slots_used("n1") == 0


def test_applied_counts_handled_commands(st):
    assert st.applied == 2
    st.apply(c.Heartbeat("nope", 1.0))  # handled, error result
    assert st.applied == 3


# ---- RegisterPeer / Heartbeat -----------------------------------------------------------
def test_register_new_peer():
    st = ClusterState()
    r = st.apply(c.RegisterPeer("n1", "host1", 8081, 6123, 77, 4, 10.0))
    assert r == Result(True, "n1")
    p = st.peers["n1"]
    assert (p.host, p.rest_port, p.raft_port, p.pid, p.slots, p.state) == \
        ("host1", 8081, 6123, 77, 4, S.ALIVE)
    assert p.registered_at == 10.0 and p.last_heartbeat == 10.0
    assert p.declared_dead_at is None
    assert st.assigned == {"n1": {}}
    assert [x.id for x in st.alive_peers()] == ["n1"]


def test_reregister_updates_fields(st):
    st.apply(c.RegisterPeer("n1", "other", 1, 2, 555, 9, 20.0))
    p = st.peers["n1"]
    assert (p.host, p.rest_port, p.raft_port, p.pid, p.slots) == ("other", 1, 2, 555, 9)
    assert p.registered_at == 20.0 and p.last_heartbeat == 20.0
    assert len(st.peers) == 2


def test_register_revives_dead_peer_empty(running):
    st = running
    st.apply(c.DeclarePeerDead("n1", 10.0))
    assert st.peers["n1"].state == S.DEAD
    r = reg(st, "n1", slots=2, time=11.0, pid=101)
    assert r.ok
    p = st.peers["n1"]
    assert p.state == S.ALIVE and p.declared_dead_at is None and p.pid == 101
    assert st.jobs_of("n1") == []
    assert st.slots_used("n1") == 0


def test_heartbeat_ok(st):
    assert st.apply(c.Heartbeat("n1", 5.0)) == Result(True)
    assert st.peers["n1"].last_heartbeat == 5.0


def test_heartbeat_never_moves_back(st):
    st.apply(c.Heartbeat("n1", 5.0))
    st.apply(c.Heartbeat("n1", 3.0))
    assert st.peers["n1"].last_heartbeat == 5.0


def test_heartbeat_unknown_peer(st):
    r = st.apply(c.Heartbeat("ghost", 5.0))
    assert (r.ok, r.code) == (False, "not-found")
    assert "ghost" in r.error


def test_heartbeat_dead_peer_is_stale(st):
    st.apply(c.DeclarePeerDead("n2", 5.0))
    r = st.apply(c.Heartbeat("n2", 6.0))
    assert (r.ok, r.code) == (False, "stale")
    assert st.peers["n2"].state == S.DEAD
    assert st.peers["n2"].last_heartbeat == 1.0


# ---- SubmitJob ---------------------------------------------------------------------------
def test_submit_creates_pending_job(st):
    r = submit(st, "j1", slots=2, time=7.0, name="clicks")
    assert r == Result(True, {"jobid": "j1", "duplicate": False})
    job = st.jobs["j1"]
    assert job.name == "clicks"
    assert job.status == S.CREATED and job.node is None and job.epoch == 0
    assert job.timestamps == {S.CREATED: 7.0}
    assert job.submitted_at == 7.0
    assert job.slots == 2
    assert list(st.pending) == ["j1"]


def test_submit_name_defaults_to_id(st):
    submit(st, "j1")
    assert st.jobs["j1"].name == "j1"


def test_submit_copies_spec(st):
    spec = {"slots": 1, "name": "a"}
    st.apply(c.SubmitJob("j1", spec, 1.0))
    spec["name"] = "mutated"
    assert st.jobs["j1"].spec.name == "a"


def test_submit_existing_id(st):
    submit(st, "j1")
    r = submit(st, "j1", name="again")
    assert (r.ok, r.code) == (False, "exists")
    assert st.jobs["j1"].name == "j1"


def test_submit_request_id_idempotent(st):
    r1 = submit(st, "j1", request_id="req-1")
    r2 = submit(st, "j2", request_id="req-1")
    assert r1.value == {"jobid": "j1", "duplicate": False}
    assert r2 == Result(True, {"jobid": "j1", "duplicate": True})
    assert list(st.jobs) == ["j1"]
    assert list(st.pending) == ["j1"]
    assert st.request_ids == {"req-1": "j1"}


def test_submit_empty_request_id_is_not_idempotent(st):
    submit(st, "j1", request_id="")
    r = submit(st, "j2", request_id="")
    assert r.value == {"jobid": "j2", "duplicate": False}
    assert st.request_ids == {}


def test_submit_request_id_after_job_ended_still_duplicate(running):
    st = running
    submit(st, "j2", request_id="r")
    st.apply(c.CancelJob("j2", 9.0))
    r = submit(st, "j3", request_id="r")
    assert r.value == {"jobid": "j2", "duplicate": True}
    assert "j3" not in st.jobs


def test_failed_submit_does_not_record_request_id(st):
    submit(st, "j1")
    r = submit(st, "j1", request_id="rq")
    assert r.code == "exists"
    assert "rq" not in st.request_ids


@pytest.mark.parametrize("slots,expected", [(1, 1), (3, 3), (0, 1), (None, 1), ("2", 2)])
def test_job_slots_property(slots, expected):
    job = S.JobRecord("j", "j", {"slots": slots}, 0.0)
    assert job.slots == expected
    assert S.JobRecord("j", "j", {}, 0.0).slots == 1


# ---- AssignJobs --------------------------------------------------------------------------
def test_assign_success(st):
    submit(st, "j1", slots=2)
    r = assign(st, ("j1", "n2", 0), time=9.0)
    assert r == Result(True, {"assigned": [("j1", 1)], "refused": []})
    job = st.jobs["j1"]
    assert job.node == "n2" and job.epoch == 1
    assert st.assigned["n2"] == {"j1": 2}
    assert st.slots_used("n2") == 2
    assert st.jobs_of("n2") == ["j1"]
    assert "j1" not in st.pending
    assert len(job.attempts) == 1
    a = job.attempts[0]
    assert (a.epoch, a.node, a.start, a.end, a.reason) == (1, "n2", 9.0, None, None)
    assert job.status == S.CREATED  # the owner reports INITIALIZING


def test_assign_refuses_over_capacity(st):
    submit(st, "big", slots=3)
    submit(st, "a", slots=2)
    submit(st, "b", slots=1)
    r = assign(st, ("big", "n1", 0), ("a", "n1", 0), ("b", "n1", 0))
    assert r.value == {"assigned": [("a", 1)], "refused": ["big", "b"]}
    assert st.slots_used("n1") == 2
    assert st.jobs["big"].epoch == 0 and st.jobs["big"].node is None
    assert list(st.pending) == ["big", "b"]


def test_assign_fills_exactly_to_capacity(st):
    submit(st, "a", slots=2)
    submit(st, "b", slots=1)
    r = assign(st, ("a", "n2", 0), ("b", "n2", 0))
    assert r.value["refused"] == []
    assert st.slots_used("n2") == 3 == st.peers["n2"].slots


def test_assign_refuses_dead_peer(st):
    submit(st, "j1")
    st.apply(c.DeclarePeerDead("n1", 2.5))
    r = assign(st, ("j1", "n1", 0))
    assert r.value == {"assigned": [], "refused": ["j1"]}
    assert st.jobs["j1"].node is None and st.jobs["j1"].epoch == 0


def test_assign_refuses_unknown_peer_and_job(st):
    submit(st, "j1")
    r = assign(st, ("j1", "ghost", 0), ("nojob", "n1", 0))
    assert r.value == {"assigned": [], "refused": ["j1", "nojob"]}
    assert "ghost" not in st.assigned


@pytest.mark.parametrize("expected", [1, -1, 5])
def test_assign_refuses_wrong_expected_epoch(st, expected):
    submit(st, "j1")
    r = assign(st, ("j1", "n1", expected))
    assert r.value == {"assigned": [], "refused": ["j1"]}
    assert st.jobs["j1"].epoch == 0


def test_assign_refuses_already_assigned(running):
    st = running
    r = assign(st, ("j1", "n2", 1))
    assert r.value == {"assigned": [], "refused": ["j1"]}
    assert st.jobs["j1"].node == "n1" and st.jobs["j1"].epoch == 1
    assert st.jobs_of("n2") == []


def test_assign_same_job_twice_in_one_command(st):
    submit(st, "j1")
    r = assign(st, ("j1", "n1", 0), ("j1", "n2", 0))
    assert r.value == {"assigned": [("j1", 1)], "refused": ["j1"]}
    assert st.jobs_of("n1") == ["j1"] and st.jobs_of("n2") == []


def test_assign_refuses_terminal_job(running):
    st = running
    report(st, "j1", 1, "n1", S.FINISHED)
    r = assign(st, ("j1", "n1", 1))
    assert r.value == {"assigned": [], "refused": ["j1"]}
    assert st.jobs["j1"].status == S.FINISHED


def test_assign_refuses_cancel_requested_job(running):
    st = running
    st.apply(c.CancelJob("j1", 6.0))
    st.apply(c.DeclarePeerDead("n1", 7.0))  # -> CANCELED, not pending
    r = assign(st, ("j1", "n2", 1))
    assert r.value["refused"] == ["j1"]


def test_assign_after_declare_dead_bumps_epoch(running):
    st = running
    st.apply(c.DeclarePeerDead("n1", 10.0))
    r = assign(st, ("j1", "n2", 1), time=11.0)
    assert r.value == {"assigned": [("j1", 2)], "refused": []}
    job = st.jobs["j1"]
    assert job.node == "n2" and job.epoch == 2
    assert [(a.epoch, a.node, a.reason) for a in job.attempts] == \
        [(1, "n1", "peer-lost"), (2, "n2", None)]


# ---- ReportStatuses ----------------------------------------------------------------------
def test_report_progression_and_timestamps(st):
    submit(st, "j1", time=1.0)
    assign(st, ("j1", "n1", 0), time=2.0)
    assert report(st, "j1", 1, "n1", S.INITIALIZING, time=3.0) == Result(True)
    assert report(st, "j1", 1, "n1", S.RUNNING, time=4.0).ok
    job = st.jobs["j1"]
    assert job.status == S.RUNNING
    assert job.timestamps == {S.CREATED: 1.0, S.INITIALIZING: 3.0, S.RUNNING: 4.0}
    assert job.end_time is None


def test_report_finished_releases_and_keeps_result(running):
    st = running
    assert report(st, "j1", 1, "n1", S.FINISHED, time=8.0, result={"rows": 3}).ok
    job = st.jobs["j1"]
    assert job.status == S.FINISHED
    assert job.result == {"rows": 3}
    assert job.node is None and job.last_node == "n1"
    assert job.end_time == 8.0
    assert st.slots_used("n1") == 0 and st.jobs_of("n1") == []
    assert (job.attempts[-1].end, job.attempts[-1].reason) == (8.0, "finished")
    assert "j1" not in st.pending


def test_report_failed_records_failure(running):
    st = running
    fail = {"exception": "ValueError: boom", "traceback": "tb"}
    assert report(st, "j1", 1, "n1", S.FAILED, time=8.0, failure=fail).ok
    job = st.jobs["j1"]
    assert job.status == S.FAILED
    assert job.result is None
    assert job.failure_count == 1
    assert job.failures == [{"exception": "ValueError: boom", "traceback": "tb",
                             "attempt": 1, "node": "n1", "time": 8.0}]
    assert job.attempts[-1].reason == "failed"
    assert fail == {"exception": "ValueError: boom", "traceback": "tb"}  # not mutated


def test_report_result_ignored_unless_finished(running):
    st = running
    report(st, "j1", 1, "n1", S.FAILED, result={"x": 1})
    assert st.jobs["j1"].result is None


def test_report_canceled_reason(running):
    st = running
    report(st, "j1", 1, "n1", S.CANCELED, time=9.0)
    assert st.jobs["j1"].status == S.CANCELED
    assert st.jobs["j1"].attempts[-1].reason == "cancelled"


def test_restarting_counts_restarts_and_keeps_failures(running):
    st = running
    for i in range(3):
        report(st, "j1", 1, "n1", S.RESTARTING, time=10.0 + i,
               failure={"exception": f"E{i}", "traceback": ""})
        report(st, "j1", 1, "n1", S.RUNNING, time=10.5 + i)
    job = st.jobs["j1"]
    assert job.restarts == 3
    assert job.failure_count == 3
    assert [f["exception"] for f in job.failures] == ["E0", "E1", "E2"]
    assert job.status == S.RUNNING
    assert job.node == "n1" and job.epoch == 1


def test_failures_list_is_capped(running):
    st = running
    for i in range(S.MAX_FAILURES_KEPT + 5):
        report(st, "j1", 1, "n1", S.RESTARTING, failure={"exception": f"E{i}"})
    job = st.jobs["j1"]
    assert job.failure_count == S.MAX_FAILURES_KEPT + 5
    assert len(job.failures) == S.MAX_FAILURES_KEPT
    assert job.failures[0]["exception"] == "E5"
    assert job.failures[-1]["exception"] == f"E{S.MAX_FAILURES_KEPT + 4}"


@pytest.mark.parametrize("epoch,node", [(0, "n1"), (2, "n1"), (1, "n2")])
def test_stale_reports_rejected(running, epoch, node):
    st = running
    r = report(st, "j1", epoch, node, S.FAILED)
    assert (r.ok, r.code) == (False, "stale")
    job = st.jobs["j1"]
    assert job.status == S.RUNNING and job.node == "n1" and job.failure_count == 0


def test_report_from_old_owner_after_move_is_stale(running):
    st = running
    st.apply(c.DeclarePeerDead("n1", 10.0))
    assign(st, ("j1", "n2", 1))
    r = report(st, "j1", 1, "n1", S.FINISHED)
    assert r.code == "stale"
    assert report(st, "j1", 2, "n2", S.RUNNING).ok
    assert st.jobs["j1"].status == S.RUNNING


def test_report_for_unassigned_job_is_stale(st):
    submit(st, "j1")
    r = report(st, "j1", 0, None, S.FAILED)  # epoch/node equal the unowned job's
    assert (r.ok, r.code) == (False, "stale")
    assert st.jobs["j1"].status == S.CREATED


def test_report_unknown_job(st):
    r = report(st, "ghost", 1, "n1", S.RUNNING)
    assert (r.ok, r.code) == (False, "not-found")


@pytest.mark.parametrize("status", [S.CREATED, S.CANCELLING, "BOGUS", ""])
def test_unreportable_status_invalid(running, status):
    st = running
    r = report(st, "j1", 1, "n1", status)
    assert (r.ok, r.code) == (False, "invalid")
    assert st.jobs["j1"].status == S.RUNNING


def test_report_after_terminal_is_stale(running):
    st = running
    report(st, "j1", 1, "n1", S.FINISHED)
    r = report(st, "j1", 1, "n1", S.RUNNING)
    assert (r.ok, r.code) == (False, "stale")
    assert st.jobs["j1"].status == S.FINISHED


def test_report_batch_gives_one_result_each(running):
    st = running
    submit(st, "j2")
    assign(st, ("j2", "n2", 0))
    res = st.apply(c.ReportStatuses((
        c.StatusReport("j1", 1, "n1", S.FINISHED, 5.0),
        c.StatusReport("j2", 9, "n2", S.RUNNING, 5.0),
        c.StatusReport("nope", 1, "n2", S.RUNNING, 5.0),
        c.StatusReport("j2", 1, "n2", S.RUNNING, 5.0),
    )))
    assert res.ok
    assert [(r.ok, r.code) for r in res.value] == \
        [(True, None), (False, "stale"), (False, "not-found"), (True, None)]
    assert st.jobs["j1"].status == S.FINISHED
    assert st.jobs["j2"].status == S.RUNNING


def test_invalid_report_leaves_job_unchanged(running):
    st = running
    res = st.apply(c.ReportStatuses((c.StatusReport("j1", 1, "n1", S.RESTARTING, 5.0,
                                                    failure="not a dict"),)))
    assert res.ok and [r.code for r in res.value] == ["invalid"]
    assert st.jobs["j1"].failure_count == 0
    assert st.jobs["j1"].status == S.RUNNING


def test_junk_report_in_batch_does_not_lose_the_others(running):
    st = running
    res = st.apply(c.ReportStatuses(("x", c.StatusReport("j1", 1, "n1", S.FINISHED, 6.0, 42))))
    assert res.ok
    assert [r.ok for r in res.value] == [False, True]
    assert st.jobs["j1"].status == S.FINISHED and st.jobs["j1"].result == 42


# ---- CancelJob ---------------------------------------------------------------------------
def test_cancel_unassigned_is_immediate(st):
    submit(st, "j1")
    r = st.apply(c.CancelJob("j1", 6.0))
    assert r == Result(True, S.CANCELED)
    job = st.jobs["j1"]
    assert job.status == S.CANCELED and job.cancel_requested
    assert job.end_time == 6.0
    assert "j1" not in st.pending
    assert job.attempts == []


def test_cancel_assigned_goes_cancelling(running):
    st = running
    r = st.apply(c.CancelJob("j1", 6.0))
    assert r == Result(True, S.CANCELLING)
    job = st.jobs["j1"]
    assert job.status == S.CANCELLING and job.cancel_requested
    assert job.node == "n1" and st.slots_used("n1") == 1
    assert job.end_time is None
    assert job.timestamps[S.CANCELLING] == 6.0


def test_cancelling_ignores_non_terminal_reports(running):
    st = running
    st.apply(c.CancelJob("j1", 6.0))
    for status in (S.RUNNING, S.RESTARTING, S.INITIALIZING):
        assert report(st, "j1", 1, "n1", status, time=7.0).ok
    job = st.jobs["j1"]
    assert job.status == S.CANCELLING
    assert job.restarts == 0
    assert S.RESTARTING not in job.timestamps


def test_cancelling_then_owner_confirms(running):
    st = running
    st.apply(c.CancelJob("j1", 6.0))
    assert report(st, "j1", 1, "n1", S.CANCELED, time=7.0).ok
    job = st.jobs["j1"]
    assert job.status == S.CANCELED and job.node is None
    assert st.slots_used("n1") == 0
    assert job.attempts[-1].reason == "cancelled"


def test_cancelling_job_may_still_finish(running):
    st = running
    st.apply(c.CancelJob("j1", 6.0))
    assert report(st, "j1", 1, "n1", S.FINISHED, time=7.0, result=1).ok
    assert st.jobs["j1"].status == S.FINISHED and st.jobs["j1"].result == 1


def test_cancel_twice_while_cancelling(running):
    st = running
    st.apply(c.CancelJob("j1", 6.0))
    r = st.apply(c.CancelJob("j1", 6.5))
    assert r == Result(True, S.CANCELLING)


def test_cancel_terminal_is_conflict(running):
    st = running
    report(st, "j1", 1, "n1", S.FINISHED)
    r = st.apply(c.CancelJob("j1", 9.0))
    assert (r.ok, r.code) == (False, "conflict")
    assert st.jobs["j1"].status == S.FINISHED
    assert st.jobs["j1"].cancel_requested is False


def test_cancel_unknown(st):
    r = st.apply(c.CancelJob("ghost", 1.0))
    assert (r.ok, r.code) == (False, "not-found")


def test_cancelling_job_on_dead_peer_becomes_canceled(running):
    st = running
    st.apply(c.CancelJob("j1", 6.0))
    r = st.apply(c.DeclarePeerDead("n1", 7.0))
    assert r == Result(True, [])
    job = st.jobs["j1"]
    assert job.status == S.CANCELED and job.end_time == 7.0
    assert job.node is None and job.last_node == "n1"
    assert job.attempts[-1].reason == "peer-lost"
    assert "j1" not in st.pending


# ---- DeclarePeerDead ---------------------------------------------------------------------
def test_declare_dead_moves_only_that_peers_jobs(st):
    for j in ("a", "b", "c", "d"):
        submit(st, j)
    assign(st, ("a", "n1", 0), ("b", "n2", 0), ("c", "n1", 0))
    for j, n in (("a", "n1"), ("b", "n2"), ("c", "n1")):
        report(st, j, 1, n, S.RUNNING)
    r = st.apply(c.DeclarePeerDead("n1", 20.0))
    assert r.ok and sorted(r.value) == ["a", "c"]
    assert st.peers["n1"].state == S.DEAD
    assert st.peers["n1"].declared_dead_at == 20.0
    assert [p.id for p in st.alive_peers()] == ["n2"]
    for j in ("a", "c"):
        job = st.jobs[j]
        assert job.status == S.CREATED and job.node is None and job.last_node == "n1"
        assert job.epoch == 1
        assert (job.attempts[-1].end, job.attempts[-1].reason) == (20.0, "peer-lost")
    b = st.jobs["b"]
    assert b.status == S.RUNNING and b.node == "n2" and b.attempts[-1].end is None
    assert st.slots_used("n1") == 0 and st.slots_used("n2") == 1
    # moved jobs wait again, after the job that never got a slot
    assert list(st.pending) == ["d", "a", "c"]


def test_declare_dead_twice_is_noop(running):
    st = running
    st.apply(c.DeclarePeerDead("n1", 10.0))
    r = st.apply(c.DeclarePeerDead("n1", 11.0))
    assert r == Result(True, [])
    assert st.peers["n1"].declared_dead_at == 10.0


def test_declare_dead_unknown(st):
    r = st.apply(c.DeclarePeerDead("ghost", 1.0))
    assert (r.ok, r.code) == (False, "not-found")


def test_declare_dead_leaves_finished_jobs_alone(running):
    st = running
    report(st, "j1", 1, "n1", S.FINISHED, time=5.0)
    st.apply(c.DeclarePeerDead("n1", 10.0))
    job = st.jobs["j1"]
    assert job.status == S.FINISHED and job.attempts[-1].reason == "finished"
    assert "j1" not in st.pending


# ---- AddArtifact -------------------------------------------------------------------------
def test_add_artifact_and_more_holders(st):
    aid = "sha256:" + "0" * 64
    assert st.apply(c.AddArtifact(aid, "lib.zip", 10, "n1", 1.0)) == Result(True, aid)
    st.apply(c.AddArtifact(aid, "lib.zip", 10, "n2", 2.0))
    st.apply(c.AddArtifact(aid, "lib.zip", 10, "n1", 3.0))
    art = st.artifacts[aid]
    assert art.nodes == ["n1", "n2"]
    # given again: young again (the janitor forgets it a grace period after the last one)
    assert (art.name, art.size, art.created) == ("lib.zip", 10, 3.0)
    st.apply(c.AddArtifact(aid, "lib.zip", 10, "n2", 2.5))
    assert st.artifacts[aid].created == 3.0


def _art(n):
    return f"sha256:{n * 64}"


def test_forget_artifacts_only_old_ones_no_job_names(st):
    for n, t in (("a", 1.0), ("b", 1.0), ("c", 1.0), ("d", 50.0)):
        st.apply(c.AddArtifact(_art(n), f"{n}.py", 1, "n1", t))
    assert st.apply(c.SubmitJob("j1", {"pyfiles": [f"artifact:{_art('b')}"]}, 2.0)).ok
    assert st.apply(c.SubmitJob("j2", {"script": f"artifact:{_art('c')}"}, 2.0)).ok
    st.apply(c.AddArtifact(_art("a"), "a.py", 1, "n2", 1.5))  # another holder: same age
    res = st.apply(c.ForgetArtifacts((_art("a"), _art("b"), _art("c"), _art("d"),
                                      _art("e"), 7), 10.0, 3610.0))
    # named by a job (pyfiles, script), uploaded after `before`, unknown, junk: kept/ignored
    assert res == Result(True, [_art("a")])
    assert sorted(st.artifacts) == [_art("b"), _art("c"), _art("d")]
    # once the jobs naming them are purged, they go too
    st.apply(c.CancelJob("j1", 20.0))
    st.apply(c.CancelJob("j2", 20.0))
    assert st.apply(c.PurgeJobs(("j1", "j2"), 30.0)).value == ["j1", "j2"]
    res = st.apply(c.ForgetArtifacts((_art("b"), _art("c"), _art("d")), 10.0, 3630.0))
    assert res.value == [_art("b"), _art("c")] and list(st.artifacts) == [_art("d")]


def test_a_tenant_s_forget_takes_its_own_claim_only(st):
    import math
    for t in ("a", "b"):
        st.apply(c.AddArtifact(_art("a"), "a.py", 1, "n1", 1.0, (t,)))
    st.apply(c.AddArtifact(_art("b"), "b.py", 1, "n1", 1.0, ("a",)))
    assert st.artifacts[_art("a")].tenants == ["a", "b"]
    # a's claim goes; b's keeps the artifact
    assert st.apply(c.ForgetArtifacts((_art("a"),), math.inf, 5.0, "a")).value == [_art("a")]
    assert st.artifacts[_art("a")].tenants == ["b"]
    # a tenant without a claim takes nothing
    assert st.apply(c.ForgetArtifacts((_art("a"),), math.inf, 6.0, "a")).value == []
    assert _art("a") in st.artifacts
    # the last claim: forgotten (unless a job names it)
    assert st.apply(c.SubmitJob("j1", {"pyfiles": [f"artifact:{_art('b')}"]}, 2.0)).ok
    assert st.apply(c.ForgetArtifacts((_art("b"),), math.inf, 7.0, "a")).value == [_art("b")]
    assert st.artifacts[_art("b")].tenants == [] and _art("b") in st.artifacts  # named
    assert st.apply(c.ForgetArtifacts((_art("a"),), math.inf, 8.0, "b")).value == [_art("a")]
    assert _art("a") not in st.artifacts


@pytest.mark.parametrize("cmd", [c.ForgetArtifacts(None, 1.0, 1.0),
                                 c.ForgetArtifacts((["x"],), 1.0, 1.0),
                                 c.ForgetArtifacts(("x",), "later", 1.0)])
def test_forget_artifacts_junk_never_raises(st, cmd):
    st.apply(c.AddArtifact(_art("a"), "a.py", 1, "n1", 1.0))
    r = st.apply(cmd)
    assert isinstance(r, Result) and _art("a") in st.artifacts


def test_a_job_naming_an_unknown_or_forgotten_artifact_is_refused(st):
    st.apply(c.AddArtifact(_art("a"), "a.py", 1, "n1", 1.0))
    assert st.apply(c.ForgetArtifacts((_art("a"),), 5.0, 3605.0)).value == [_art("a")]
    # the peer checked before the janitor's forget was applied: the state refuses it
    r = st.apply(c.SubmitJob("j1", {"pyfiles": ["/lib", f"artifact:{_art('a')}"]}, 6.0))
    assert not r.ok and r.code == "invalid" and f"unknown artifact artifact:{_art('a')}" in r.error
    r = st.apply(c.SubmitJob("j1", {"script": f"artifact:{_art('z')}"}, 6.0))
    assert not r.ok and "j1" not in st.jobs
    st.apply(c.AddArtifact(_art("a"), "a.py", 1, "n1", 7.0))  # uploaded again: usable
    assert st.apply(c.SubmitJob("j1", {"pyfiles": [f"artifact:{_art('a')}"]}, 8.0)).ok


# ---- edge: peer re-registering while ALIVE -----------------------------------------------
def test_reregister_with_fewer_slots_never_overcommits(st):
    for j in ("a", "b", "c"):
        submit(st, j)
    assign(st, ("a", "n2", 0), ("b", "n2", 0), ("c", "n2", 0))
    reg(st, "n2", slots=1, time=5.0, pid=999)
    assert st.slots_used("n2") <= st.peers["n2"].slots


def test_submit_jobs_group_commit_gives_one_result_each():
    st = ClusterState()
    res = st.apply(c.SubmitJobs((c.SubmitJob("a", {}, 1.0), c.SubmitJob("a", {}, 1.0),
                                 "junk", c.SubmitJob("b", {}, 2.0, "rid"))))
    assert res.ok
    assert [(r.ok, r.code) for r in res.value] == [(True, None), (False, "exists"),
                                                   (False, "invalid"), (True, None)]
    assert list(st.pending) == ["a", "b"] and st.request_ids == {"rid": "b"}


def test_purge_forgets_only_ended_jobs_and_expiry_is_pure():
    from jm.policy.jobs.retention import expired_jobs, track_ended
    st = ClusterState()
    reg(st, "n1")
    seen: dict = {}
    for i, t in enumerate((10.0, 20.0, 30.0)):
        st.apply(c.SubmitJob(f"e{i}", {}, t, f"r{i}"))
        st.apply(c.CancelJob(f"e{i}", t))  # unassigned: CANCELED at once
        seen = track_ended(st, seen, now=t)  # the deciding peer sees it ended at t
    st.apply(c.SubmitJob("live", {}, 1.0))
    assert expired_jobs(seen, now=100.0, expiration=75.0, capacity=10) == ["e0", "e1"]
    assert expired_jobs(seen, now=100.0, expiration=1000.0, capacity=1) == ["e0", "e1"]
    assert expired_jobs(seen, now=100.0, expiration=1000.0, capacity=5) == []
    res = st.apply(c.PurgeJobs(("e0", "live", "nope"), 101.0))
    assert res.value == ["e0"]
    assert "e0" not in st.jobs and "live" in st.jobs and "r0" not in st.request_ids
    assert "r1" in st.request_ids


def test_declare_dead_is_stale_if_the_peer_was_heard_from_after_the_decision():
    st = ClusterState()
    st.apply(c.RegisterPeer("n1", "h", 1, 2, 10, 4, 1.0))
    st.apply(c.SubmitJob("j", {}, 1.0))
    st.apply(c.AssignJobs((c.Assignment("j", "n1", 0),), 1.5))
    seen = (st.peers["n1"].last_heartbeat, st.peers["n1"].registered_at)
    st.apply(c.Heartbeat("n1", 2.0))  # committed before the leader's declaration
    r = st.apply(c.DeclarePeerDead("n1", 5.0, *seen))
    assert not r.ok and r.code == "stale"
    assert st.peers["n1"].state == S.ALIVE and st.jobs["j"].node == "n1"
    seen = (st.peers["n1"].last_heartbeat, st.peers["n1"].registered_at)
    r = st.apply(c.DeclarePeerDead("n1", 6.0, *seen))
    assert r.ok and r.value == ["j"] and st.peers["n1"].state == S.DEAD


# ---- a retried report batch applies once --------------------------------------------------
def test_a_report_batch_committed_twice_counts_once(running):
    failure = {"exception": "boom", "traceback": ""}
    batch = c.ReportStatuses((c.StatusReport("j1", 1, "n1", S.RESTARTING, 6.0, None, failure,
                                             seq=10),))
    first, again = running.apply(batch), running.apply(batch)  # the retry also commits
    assert first.value[0].ok and again.value[0] == Result(True, "duplicate")
    job = running.jobs["j1"]
    assert (job.restarts, job.failure_count, len(job.failures)) == (1, 1, 1)
    # later reports of the same process still apply; an older one does not
    assert report_seq(running, "j1", 1, "n1", S.RUNNING, 11).value is None
    assert running.jobs["j1"].status == S.RUNNING
    assert report_seq(running, "j1", 1, "n1", S.RESTARTING, 9).value == "duplicate"
    assert running.jobs["j1"].restarts == 1


def test_report_sequence_starts_over_with_a_new_epoch(running):
    assert report_seq(running, "j1", 1, "n1", S.RESTARTING, 50).ok
    running.apply(c.DeclarePeerDead("n1", 7.0))
    assert assign(running, ("j1", "n2", 1)).value["assigned"] == [("j1", 2)]
    # the new owner's process numbers its reports from its own (smaller) counter
    assert report_seq(running, "j1", 2, "n2", S.RUNNING, 5).value is None
    assert running.jobs["j1"].status == S.RUNNING and running.jobs["j1"].report_seq == 5


def test_reports_without_a_sequence_always_apply(running):
    report(running, "j1", 1, "n1", S.RESTARTING)
    report(running, "j1", 1, "n1", S.RESTARTING)
    assert running.jobs["j1"].restarts == 2


def report_seq(st, job_id, epoch, node, status, seq):
    res = st.apply(c.ReportStatuses((c.StatusReport(job_id, epoch, node, status, 6.0,
                                                    seq=seq),)))
    return res.value[0]


def test_barrier_changes_nothing_but_the_applied_count():
    import copy
    from raft.commands import Barrier
    st = ClusterState()
    st.apply(c.SubmitJob("j", {"name": "x"}, 1.0))
    before = copy.deepcopy(st.__dict__)
    res = st.apply(Barrier())
    assert res.ok
    after = dict(st.__dict__)
    assert after.pop("applied") == before.pop("applied") + 1
    assert after == before


def test_declare_dead_is_stale_after_a_heartbeat_stamped_in_the_past(st):
    """The leader decided from what it saw (beats); the peer then heartbeats with a clock
    stepped back (its stamp is older than the last one): it was heard from, so the
    declaration must not pass (a compare on the senders' stamps let it through)."""
    st.apply(c.Heartbeat("n1", 100.0))
    p = st.peers["n1"]
    seen = (p.last_heartbeat, p.registered_at, p.beats)
    assert st.apply(c.Heartbeat("n1", 70.0)).ok  # the clock stepped back 30 s
    r = st.apply(c.DeclarePeerDead("n1", 101.0, *seen))
    assert (r.ok, r.code) == (False, "stale")
    assert st.peers["n1"].state == S.ALIVE
    # with nothing heard since the decision, it passes
    p = st.peers["n1"]
    r = st.apply(c.DeclarePeerDead("n1", 102.0, p.last_heartbeat, p.registered_at, p.beats))
    assert r.ok and st.peers["n1"].state == S.DEAD


def test_declare_dead_of_an_older_version_still_compares_stamps(st):
    """An entry written before `seen_beats` existed (replayed from an old journal)."""
    st.apply(c.Heartbeat("n1", 100.0))
    p = st.peers["n1"]
    r = st.apply(c.DeclarePeerDead("n1", 101.0, 99.0, p.registered_at))
    assert (r.ok, r.code) == (False, "stale")
    r = st.apply(c.DeclarePeerDead("n1", 101.0, 100.0, p.registered_at))
    assert r.ok


def test_a_heartbeat_carries_the_peers_free_space_warning_bounded(st):
    assert st.apply(c.Heartbeat("n1", 5.0, True, "x" * 10_000)).ok
    assert st.peers["n1"].disk_low == "x" * S.MAX_DISK_LOW
    assert st.apply(c.Heartbeat("n1", 6.0, True, ["junk"])).ok  # not a string: none
    assert st.peers["n1"].disk_low == ""


def test_an_ended_job_keeps_a_compact_record(running):
    """raft/records.py compact_ended: a job that failed and restarted many times keeps its
    last failures (only the last with its whole traceback), its first attempt and its
    last ones once it ends; the counts stay whole."""
    st = running
    tb = "Traceback (most recent call last):\n" + "  frame\n" * 2000 + "ValueError: boom"
    for i in range(S.MAX_FAILURES_KEPT + 2):
        report(st, "j1", 1, "n1", S.RESTARTING, failure={"exception": f"E{i}",
                                                         "traceback": f"{i}" + tb})
        report(st, "j1", 1, "n1", S.RUNNING)
    job = st.jobs["j1"]
    assert len(job.failures) == S.MAX_FAILURES_KEPT  # while it runs: all it may keep
    assert all(len(f["traceback"]) > S.ENDED_TRACE_CHARS for f in job.failures)
    report(st, "j1", 1, "n1", S.FAILED, failure={"exception": "last", "traceback": tb})
    assert job.status == S.FAILED and job.failure_count == S.MAX_FAILURES_KEPT + 3
    assert [f["exception"] for f in job.failures] == [
        f"E{i}" for i in range(S.MAX_FAILURES_KEPT - 2, S.MAX_FAILURES_KEPT + 2)] + ["last"]
    assert job.failures[-1]["traceback"] == tb
    for f in job.failures[:-1]:
        whole = f["exception"][1:] + tb
        assert f["traceback"] == (f"[{len(whole) - S.ENDED_TRACE_CHARS} characters cut]\n"
                                  + whole[-S.ENDED_TRACE_CHARS:])


def test_an_ended_job_keeps_its_first_and_last_attempts():
    st = ClusterState()
    st.apply(c.RegisterPeer("n1", "h", 8000, 9000, 100, 4, 1.0))
    st.apply(c.SubmitJob("j", {}, 2.0))
    for i in range(12):  # each restart of the peer (new pid) requeues, then it is placed
        st.apply(c.AssignJobs((c.Assignment("j", "n1", i),), 3.0 + i))
        st.apply(c.RegisterPeer("n1", "h", 8000, 9000, 101 + i, 4, 3.5 + i))
    assert len(st.jobs["j"].attempts) == 12
    st.apply(c.AssignJobs((c.Assignment("j", "n1", 12),), 20.0))
    st.apply(c.CancelJob("j", 21.0))
    report(st, "j", 13, "n1", S.CANCELED, time=22.0)
    job = st.jobs["j"]
    assert job.status == S.CANCELED
    assert [a.epoch for a in job.attempts] == [1] + list(range(14 - S.ENDED_ATTEMPTS_KEPT, 14))
    assert job.attempts[-1].reason == "cancelled"


# ---- a job that takes its peers down --------------------------------------------------
def _lose_on(st, job_id, node, epoch, t, heard_after, beat=True):
    """Place the job on `node` at t, hear from the peer `heard_after` s later (or not at
    all), and declare it dead 3 s after that."""
    assert assign(st, (job_id, node, epoch - 1), time=t).value["assigned"] == [(job_id, epoch)]
    if beat:
        assert st.apply(c.Heartbeat(node, t + heard_after)).ok
    return st.apply(c.DeclarePeerDead(node, t + heard_after + 3.0))


def test_a_job_whose_peers_die_as_it_starts_moves_on_with_the_evidence():
    """The state keeps the run of losses; the next JobMaster counts them against the
    job's restart strategy (jm/policy/jobs/attempt.py)."""
    st = ClusterState()
    for n in ("n1", "n2", "n3", "n4"):
        reg(st, n)
    submit(st, "bomb")
    for i, node in enumerate(("n1", "n2", "n3")):
        assert _lose_on(st, "bomb", node, i + 1, 10.0 * (i + 1), 1.0).value == ["bomb"]
        assert st.jobs["bomb"].status == S.CREATED and "bomb" in st.pending
    assert S.peer_losses(st.jobs["bomb"].attempts) == (
        S.PeerLoss("n1", 14.0), S.PeerLoss("n2", 24.0), S.PeerLoss("n3", 34.0))
    assign(st, ("bomb", "n4", 3), time=40.0)  # the running attempt is passed over
    assert [x.node for x in S.peer_losses(st.jobs["bomb"].attempts)] == ["n1", "n2", "n3"]


def test_an_attempt_that_ran_a_while_ends_the_run_of_losses():
    st = ClusterState()
    for n in ("n1", "n2", "n3"):
        reg(st, n)
    submit(st, "j")
    _lose_on(st, "j", "n1", 1, 10.0, 1.0)
    _lose_on(st, "j", "n2", 2, 20.0, 30.0)  # ran 30 s there
    _lose_on(st, "j", "n3", 3, 60.0, 1.0)
    assert S.peer_losses(st.jobs["j"].attempts) == (S.PeerLoss("n3", 64.0),)


def test_a_job_killing_the_same_restarted_peer_again_and_again_keeps_the_evidence():
    st = ClusterState()
    reg(st, "n1")
    submit(st, "bomb")
    for i in range(3):  # its supervisor restarts it each time; the job lands there again
        _lose_on(st, "bomb", "n1", i + 1, 10.0 * (i + 1), 0.5)
        reg(st, "n1", time=10.0 * (i + 1) + 5, pid=200 + i)
    assert st.jobs["bomb"].status == S.CREATED
    assert len(S.peer_losses(st.jobs["bomb"].attempts)) == 3


@pytest.mark.parametrize("case", ["ran-a-while", "never-heard"])
def test_host_losses_that_do_not_point_at_the_job_move_it_on(case):
    """Chaos: a peer killed while the job had run for a while, or a peer that was already
    gone when the job was placed on it (no heartbeat since)."""
    st = ClusterState()
    for n in ("n1", "n2", "n3"):
        reg(st, n)
    submit(st, "j")
    for i, node in enumerate(("n1", "n2", "n3")):
        heard, beat = 1.0, True
        if i == 2 and case == "ran-a-while":
            heard = 30.0
        if i == 2 and case == "never-heard":
            beat = False
        assert _lose_on(st, "j", node, i + 1, 10.0 * (i + 1), heard, beat).value == ["j"]
    assert st.jobs["j"].status == S.CREATED and "j" in st.pending
    assert S.peer_losses(st.jobs["j"].attempts) == ()
