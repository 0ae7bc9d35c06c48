"""Unit tests for savepoints, stop-with-savepoint, planned moves and drain in ClusterState."""
from __future__ import annotations

import pytest

from raft import commands as c
from raft import state as S
from raft.state import ClusterState
from tests.unit.test_state import assign, reg, report, submit


def streaming(st, job_id, slots=1):
    return submit(st, job_id, slots=slots, **{"job-type": "streaming"})


@pytest.fixture
def st():
    s = ClusterState()
    reg(s, "n1", slots=2)
    reg(s, "n2", slots=2)
    streaming(s, "s1")
    assign(s, ("s1", "n1", 0))
    report(s, "s1", 1, "n1", S.RUNNING)
    return s


def trigger(st, job="s1", tid="t1", stop=False, target=None):
    return st.apply(c.TriggerSavepoint(job, tid, target, stop, 10.0))


def complete(st, job="s1", epoch=1, node="n1", tid="t1", location="/sp/1", failure=None,
             result=None):
    return st.apply(c.CompleteSavepoint(job, epoch, node, tid, location, failure, 11.0, result))


def move(st, *moves):
    res = st.apply(c.MoveJobs(tuple(c.Move(*m) for m in moves), "test", 12.0))
    assert res.ok
    return res.value


# ---- savepoints -----------------------------------------------------------------------
def test_savepoint_trigger_is_idempotent_per_trigger_id(st):
    assert trigger(st).value == {"request-id": "t1", "duplicate": False}
    assert trigger(st).value == {"request-id": "t1", "duplicate": True}
    assert [sp.id for sp in st.jobs["s1"].pending_savepoints()] == ["t1"]
    # the same id for a different kind of request is a conflict, not a silent success
    assert trigger(st, stop=True).code == "conflict"


def test_savepoint_completion_records_location(st):
    trigger(st, target="/mine")
    assert complete(st, location="/mine/savepoint-1").ok
    sp = st.jobs["s1"].savepoints["t1"]
    assert (sp.status, sp.location, sp.failure, sp.target) == (S.COMPLETED, "/mine/savepoint-1",
                                                               None, "/mine")
    assert st.jobs["s1"].savepoint_location == "/mine/savepoint-1"
    assert st.jobs["s1"].status == S.RUNNING  # a plain savepoint does not stop the job
    assert complete(st).code == "conflict"  # no longer in progress


def test_savepoint_completion_is_fenced_by_epoch(st):
    trigger(st)
    assert complete(st, epoch=0).code == "stale"
    assert complete(st, node="n2").code == "stale"
    assert st.jobs["s1"].savepoints["t1"].status == S.IN_PROGRESS


def test_savepoint_refused_for_batch_unknown_and_ended_jobs(st):
    submit(st, "b1")
    assert trigger(st, job="b1").code == "conflict"
    assert "streaming" in trigger(st, job="b1").error
    assert trigger(st, job="nope").code == "not-found"
    report(st, "s1", 1, "n1", S.FINISHED)
    assert trigger(st, tid="t9").code == "conflict"


def test_stop_with_savepoint_finishes_the_job(st):
    assert trigger(st, stop=True).ok
    job = st.jobs["s1"]
    assert job.stop_trigger == "t1" and job.status == S.RUNNING
    assert trigger(st, tid="t2", stop=True).code == "conflict"  # already stopping
    assert trigger(st, tid="t3").code == "conflict"
    assert complete(st, result={"stopped": True}).ok
    assert job.status == S.FINISHED and job.node is None and job.stop_trigger is None
    assert job.result == {"stopped": True} and job.savepoint_location == "/sp/1"
    assert job.attempts[-1].reason == "stopped"
    assert st.slots_used("n1") == 0


def test_failed_stop_keeps_the_job_running(st):
    trigger(st, stop=True)
    assert complete(st, location=None, failure="OSError: disk full").ok
    job = st.jobs["s1"]
    assert job.status == S.RUNNING and job.stop_trigger is None and job.node == "n1"
    assert job.savepoints["t1"].failure == "OSError: disk full"


def test_pending_savepoints_fail_when_the_job_ends(st):
    trigger(st)
    st.apply(c.CancelJob("s1", 13.0))
    report(st, "s1", 1, "n1", S.CANCELED)
    sp = st.jobs["s1"].savepoints["t1"]
    assert sp.status == S.COMPLETED and "CANCELED" in sp.failure


def test_stop_survives_the_owner_dying(st):
    trigger(st, stop=True)
    st.apply(c.DeclarePeerDead("n1", 14.0))
    job = st.jobs["s1"]
    assert job.status == S.CREATED and job.stop_trigger == "t1"
    assign(st, ("s1", "n2", 1))
    assert complete(st, epoch=2, node="n2").ok  # the new owner takes it
    assert job.status == S.FINISHED


def test_savepoint_records_are_bounded(st):
    for i in range(S.MAX_SAVEPOINTS_KEPT + 5):
        trigger(st, tid=f"t{i}")
        complete(st, tid=f"t{i}", location=f"/sp/{i}")
    assert len(st.jobs["s1"].savepoints) == S.MAX_SAVEPOINTS_KEPT
    assert f"t{S.MAX_SAVEPOINTS_KEPT + 4}" in st.jobs["s1"].savepoints


# ---- planned moves --------------------------------------------------------------------
def test_move_reserves_the_target_and_release_reassigns(st):
    assert move(st, ("s1", "n1", "n2", 1))[0].ok
    job = st.jobs["s1"]
    assert job.move_to == "n2" and job.node == "n1" and job.status == S.RUNNING
    assert st.slots_used("n2") == 1 and st.moves_in_flight() == 1
    res = st.apply(c.ReleaseJob("s1", 1, "n1", 13.0))
    assert res.ok and res.value == "n2"
    assert (job.node, job.epoch, job.move_to, job.moves) == ("n2", 2, None, 1)
    assert [a.reason for a in job.attempts] == ["moved", None]
    assert st.slots_used("n1") == 0 and st.slots_used("n2") == 1 and st.moves_in_flight() == 0
    # the old owner cannot report any more
    assert report(st, "s1", 1, "n1", S.RUNNING).code == "stale"


def test_release_is_fenced(st):
    move(st, ("s1", "n1", "n2", 1))
    assert st.apply(c.ReleaseJob("s1", 0, "n1", 13.0)).code == "stale"
    assert st.apply(c.ReleaseJob("s1", 1, "n2", 13.0)).code == "stale"


@pytest.mark.parametrize("why", ["batch", "epoch", "source", "full", "same", "dead", "draining",
                                 "stopping", "cancelling", "moving"])
def test_move_refusals(st, why):
    m = ("s1", "n1", "n2", 1)
    if why == "batch":
        submit(st, "b1")
        assign(st, ("b1", "n1", 0))
        m = ("b1", "n1", "n2", 1)
    elif why == "epoch":
        m = ("s1", "n1", "n2", 0)
    elif why == "source":
        m = ("s1", "n2", "n1", 1)
    elif why == "full":
        streaming(st, "big", slots=2)
        assign(st, ("big", "n2", 0))
    elif why == "same":
        m = ("s1", "n1", "n1", 1)
    elif why == "dead":
        st.apply(c.DeclarePeerDead("n2", 11.0))
    elif why == "draining":
        st.apply(c.DrainPeer("n2", True, 11.0))
    elif why == "stopping":
        trigger(st, stop=True)
    elif why == "cancelling":
        st.apply(c.CancelJob("s1", 11.0))
    elif why == "moving":
        reg(st, "n3")
        move(st, ("s1", "n1", "n3", 1))
    out = move(st, m)
    assert not out[0].ok and out[0].code == "conflict"


def test_cancel_during_move_wins(st):
    move(st, ("s1", "n1", "n2", 1))
    st.apply(c.CancelJob("s1", 13.0))
    assert st.jobs["s1"].move_to is None and st.slots_used("n2") == 0
    assert st.apply(c.ReleaseJob("s1", 1, "n1", 14.0)).ok
    assert st.jobs["s1"].status == S.CANCELED


def test_target_dying_during_move_sends_job_to_placement(st):
    move(st, ("s1", "n1", "n2", 1))
    st.apply(c.DeclarePeerDead("n2", 13.0))
    assert st.jobs["s1"].move_to is None and st.moves_in_flight() == 0
    assert st.apply(c.ReleaseJob("s1", 1, "n1", 14.0)).value is None
    assert st.jobs["s1"].status == S.CREATED and "s1" in st.pending


def test_source_dying_during_move_cancels_the_reservation(st):
    move(st, ("s1", "n1", "n2", 1))
    st.apply(c.DeclarePeerDead("n1", 13.0))
    job = st.jobs["s1"]
    assert job.move_to is None and st.slots_used("n2") == 0 and job.status == S.CREATED
    assert job.attempts[-1].reason == "peer-lost"


def test_stop_is_refused_while_moving(st):
    move(st, ("s1", "n1", "n2", 1))
    assert trigger(st, stop=True).code == "conflict"
    assert trigger(st, tid="t2").ok  # a plain savepoint is fine


# ---- drain ----------------------------------------------------------------------------
def test_drain_keeps_new_work_away_and_undrain_restores(st):
    assert st.apply(c.DrainPeer("n2", True, 11.0)).ok
    assert [p.id for p in st.schedulable_peers()] == ["n1"]
    streaming(st, "s2")
    assert assign(st, ("s2", "n2", 0)).value["refused"] == ["s2"]
    assert st.apply(c.DrainPeer("n2", False, 12.0)).ok
    assert assign(st, ("s2", "n2", 0)).value["assigned"] == [("s2", 1)]


def test_drain_errors(st):
    assert st.apply(c.DrainPeer("nope", True, 11.0)).code == "not-found"
    st.apply(c.DeclarePeerDead("n2", 11.0))
    assert st.apply(c.DrainPeer("n2", True, 12.0)).code == "conflict"
    assert st.apply(c.DrainPeer("n2", False, 12.0)).ok  # undoing is always fine


def test_drain_cancels_moves_onto_the_drained_peer(st):
    move(st, ("s1", "n1", "n2", 1))
    st.apply(c.DrainPeer("n2", True, 13.0))
    assert st.jobs["s1"].move_to is None and st.slots_used("n2") == 0


def test_drain_survives_re_registration(st):
    st.apply(c.DrainPeer("n2", True, 11.0))
    reg(st, "n2", pid=999, time=12.0)
    assert st.peers["n2"].draining


def test_heartbeat_carries_readiness_and_register_weight():
    st = ClusterState()
    st.apply(c.RegisterPeer("n1", "h", 1, 2, 3, 4, 1.0, weight=0.0, ready=False))
    assert not st.peers["n1"].ready and st.peers["n1"].share_weight == 4.0
    st.apply(c.Heartbeat("n1", 2.0, ready=True))
    assert st.peers["n1"].ready
    st.apply(c.RegisterPeer("n2", "h", 1, 2, 3, 4, 1.0, weight=1.5))
    assert st.peers["n2"].share_weight == 1.5
