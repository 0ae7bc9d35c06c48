"""Unit tests for jm/policy/jobs/intents.py: what a job's record asks of its owner."""
from __future__ import annotations

from raft import commands as c
from raft.state import ClusterState
from jm.policy.jobs.intents import NONE, Intents


def running_job() -> tuple[ClusterState, str]:
    st = ClusterState()
    assert st.apply(c.RegisterPeer("n1", "h-n1", 8000, 9000, 100, 2, 1.0)).ok
    assert st.apply(c.SubmitJob("j1", {"entry": "m:f", "job-type": "streaming"}, 2.0, "")).ok
    assert st.apply(c.AssignJobs((c.Assignment("j1", "n1", 0),), 3.0)).ok
    return st, "j1"


def test_a_job_nothing_is_asked_of_reads_as_the_one_shared_none():
    st, job_id = running_job()
    assert Intents.of(st.jobs[job_id]) is NONE
    assert NONE == Intents()


def test_a_savepoint_a_stop_and_a_cancel_are_read_past_the_shortcut():
    st, job_id = running_job()
    assert st.apply(c.TriggerSavepoint(job_id, "t1", "/sp", False, 4.0)).ok
    got = Intents.of(st.jobs[job_id])
    assert got is not NONE and got.savepoints == (("t1", "/sp"),) and got.stop is None
    assert st.apply(c.TriggerSavepoint(job_id, "t2", None, True, 5.0)).ok
    got = Intents.of(st.jobs[job_id])
    assert got.stop == ("t2", None) and got.kind() is not None
    st2, other = running_job()
    assert st2.apply(c.CancelJob(other, 6.0)).ok
    assert Intents.of(st2.jobs[other]).cancel
