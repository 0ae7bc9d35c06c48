"""Named pipelines in the replicated state (raft/pipelines.py): created with their first
job; an unchanged spec is the running version; a changed one stops the running job with
a savepoint and, in the command that ends it, starts the next version from that
savepoint; a failed stop leaves the old version running; a batch pipeline's job is
cancelled; history bounded; delete cancels."""
from raft import commands as c
from raft import pipelines as P
from raft import state as S
from raft.state import ClusterState
from tests.unit.test_state import assign, reg, report

SPEC = {"entry": "m:f", "job-type": "streaming", "args": {"v": 1}}


def put(st, spec, job_id, name="clicks", tenant="a", time=5.0):
    return st.apply(c.PutPipeline(name, spec, job_id, time, tenant, "alice"))


def running(st, job_id, node="n1"):
    assign(st, (job_id, node, 0))
    report(st, job_id, st.jobs[job_id].epoch, node, S.RUNNING)


def cluster():
    st = ClusterState()
    reg(st, "n1", slots=4)
    return st


def test_create_keep_and_upgrade_from_the_stop_s_savepoint():
    st = cluster()
    res = put(st, SPEC, "j1")
    assert res.ok and res.value["outcome"] == "created" and res.value["jobid"] == "j1"
    job = st.jobs["j1"]
    assert (job.tenant, job.submitter, job.name) == ("a", "alice", "clicks")
    running(st, "j1")
    again = put(st, dict(SPEC), "unused")
    assert again.value["outcome"] == "unchanged" and again.value["jobid"] == "j1"
    v2 = dict(SPEC, args={"v": 2})
    res = put(st, v2, "j2")
    assert res.ok and res.value["outcome"] == "upgrading" and res.value["pending-version"] == 2
    assert st.jobs["j1"].stop_trigger == "pipeline-clicks-v2" and "j2" not in st.jobs
    assert put(st, v2, "j2-again").value["outcome"] == "upgrading"  # the same PUT again
    res = put(st, dict(SPEC, args={"v": 3}), "j3")
    assert not res.ok and res.code == "conflict" and "upgrading to version 2" in res.error
    # the stop completes: in the same command the next version starts from its savepoint
    res = st.apply(c.CompleteSavepoint("j1", 1, "n1", "pipeline-clicks-v2", "/sp/9", None,
                                       9.0))
    assert res.ok and st.jobs["j1"].status == S.FINISHED
    new = st.jobs["j2"]
    assert new.status == S.CREATED and new.spec.savepoint_path == "/sp/9"
    p = st.pipelines["clicks"]
    assert [(v.version, v.job_id, v.restored_from) for v in p.versions] == [
        (1, "j1", None), (2, "j2", "/sp/9")]
    assert p.pending is None and st.upgrading == {}
    assert p.versions[0].spec == SPEC  # kept for a rollback


def test_a_failed_stop_keeps_the_old_version_and_says_why():
    st = cluster()
    put(st, SPEC, "j1")
    running(st, "j1")
    put(st, dict(SPEC, args={"v": 2}), "j2")
    st.apply(c.CompleteSavepoint("j1", 1, "n1", "pipeline-clicks-v2", None, "disk full",
                                 9.0))
    p = st.pipelines["clicks"]
    assert st.jobs["j1"].status == S.RUNNING and p.pending is None and "j2" not in st.jobs
    assert "its stop-with-savepoint failed: disk full" in p.last_error
    assert put(st, dict(SPEC, args={"v": 2}), "j2b").value["outcome"] == "upgrading"


def test_a_batch_pipeline_s_job_is_cancelled_and_an_ended_one_replaced_at_once():
    st = cluster()
    batch = {"entry": "m:f"}
    put(st, batch, "b1")
    running(st, "b1")
    res = put(st, {"entry": "m:g"}, "b2")
    assert res.value["outcome"] == "upgrading" and st.jobs["b1"].status == S.CANCELLING
    report(st, "b1", 1, "n1", S.CANCELED)
    assert st.jobs["b2"].status == S.CREATED and st.pipelines["clicks"].current.job_id == "b2"
    assign(st, ("b2", "n1", 0))
    report(st, "b2", 1, "n1", S.FINISHED)
    res = put(st, {"entry": "m:h"}, "b3")  # the running version ended: started at once
    assert res.value["outcome"] == "upgraded" and res.value["jobid"] == "b3"


def test_bad_input_other_tenants_history_bound_and_delete():
    st = cluster()
    assert put(st, SPEC, "x1", name="bad name").code == "invalid"
    assert put(st, [1], "x1").code == "invalid"
    put(st, SPEC, "j0")
    res = put(st, SPEC, "x1", tenant="b")
    assert not res.ok and res.code == "conflict"
    for n in range(1, P.MAX_VERSIONS + 5):
        report_end = st.jobs[st.pipelines["clicks"].current.job_id]
        st.apply(c.CancelJob(report_end.id, 6.0))
        assert put(st, dict(SPEC, args={"v": n}), f"j{n}").ok
    p = st.pipelines["clicks"]
    assert len(p.versions) == P.MAX_VERSIONS and p.current.version == P.MAX_VERSIONS + 4
    running(st, p.current.job_id)
    res = st.apply(c.DeletePipeline("clicks", 7.0))
    assert res.ok and "clicks" not in st.pipelines
    assert st.jobs[res.value["jobid"]].status == S.CANCELLING
    assert st.apply(c.DeletePipeline("clicks", 7.0)).code == "not-found"
