"""Unit tests for membership in the replicated state (raft/members.py), the drain deadline
(Move with restart, the ResourceManager's pure selection) and the nodes view."""
from __future__ import annotations

import pytest

from jm.cluster.members.resourcemanager import deadline_moves, overdue_jobs
from jm.wire import views
from raft import commands as c
from raft import state as S
from raft.members import node_of
from raft.state import ClusterState
from tests.unit.test_state import assign, reg, report, submit


@pytest.fixture
def st():
    s = ClusterState()
    reg(s, "n1", slots=2)
    reg(s, "n2", slots=2)
    return s


def test_node_of_peer_line():
    assert node_of("10.0.0.4:8081:6123") == "10.0.0.4:6123"


def test_admit_lists_a_joining_member_until_it_registers(st):
    res = st.apply(c.AdmitPeer("h3:8083:9003", 1.0))
    assert res.ok and res.value == "h3:9003"
    assert st.joining == {"h3:9003": "h3:8083:9003"}
    view = views.nodes(st, "n1", ["n1", "n2", "h3:9003"])["nodes"]
    joining = [n for n in view if n["id"] == "h3:9003"][0]
    assert joining["state"] == "JOINING" and joining["rest-port"] == 8083
    assert joining["raft-role"] == "follower"
    assert st.apply(c.RegisterPeer("h3:9003", "h3", 8083, 9003, 7, 2, 2.0)).ok
    assert st.joining == {}
    assert [n["state"] for n in views.nodes(st, "n1", ["n1", "n2", "h3:9003"])["nodes"]] \
        == ["ALIVE", "ALIVE", "ALIVE"]


def test_remove_a_dead_peer_at_once_and_it_cannot_register_again(st):
    assert st.apply(c.DeclarePeerDead("n2", 5.0)).ok
    res = st.apply(c.RemovePeer("n2", 6.0))
    assert res.ok and res.value["state"] == "REMOVED"
    assert "n2" not in st.peers and st.removed == {"n2": 6.0}
    assert st.removed_dead == {"n2"}  # the leader takes it out of Raft without waiting
    pending = views.membership_pending(st, ["n1", "n2"])
    assert pending == [{"id": "n2", "change": "remove", "since": 6000,
                        "waits-for-peer": False}]
    again = reg(st, "n2", time=7.0)
    assert not again.ok and again.code == "removed"


def test_readmitted_peer_registers(st):
    st.apply(c.DeclarePeerDead("n2", 5.0))
    st.apply(c.RemovePeer("n2", 6.0))
    assert st.apply(c.AdmitPeer("h:8000:9000", 8.0)).value == "h:9000"
    assert "h:9000" not in st.removed
    st.apply(c.AdmitPeer("n2:0:1", 8.5))  # a node id "n2" cannot come back, but its
    assert st.removed_dead == {"n2"}       # tombstone goes with a new admission of it
    st.removed["x:1"] = 1.0
    st.removed_dead.add("x:1")
    st.apply(c.AdmitPeer("x:0:1", 8.6))
    assert "x:1" not in st.removed_dead
    assert reg(st, "h:9000", time=9.0).ok


def test_removing_a_never_started_member_tombstones_it(st):
    res = st.apply(c.RemovePeer("h9:9009", 3.0))
    assert res.ok and res.value["state"] == "REMOVED" and "h9:9009" in st.removed


def test_a_live_peer_leaves_only_once_it_holds_no_job(st):
    submit(st, "b1")
    assign(st, ("b1", "n2", 0))
    report(st, "b1", 1, "n2", S.RUNNING)
    res = st.apply(c.RemovePeer("n2", 6.0, 30.0))
    assert res.ok and res.value == {"state": "LEAVING", "jobs": ["b1"]}
    p = st.peers["n2"]
    assert p.draining and p.leaving and p.drain_deadline == 30.0
    assert views.peer_state(st, p) == "LEAVING"
    assert not st.apply(c.DrainPeer("n2", False, 7.0)).ok  # no undrain while leaving
    refused = st.apply(c.RetirePeer("n2", 8.0))
    assert not refused.ok and refused.code == "conflict"
    report(st, "b1", 1, "n2", S.FINISHED)
    assert views.membership_pending(st, ["n1", "n2", "h4:1"]) == []
    assert st.apply(c.RetirePeer("n2", 9.0)).ok
    assert "n2" not in st.peers and "n2" in st.removed
    assert st.removed_dead == set()  # alive: the leader lets it see its removal first
    assert views.membership_pending(st, ["n1", "n2"])[0]["waits-for-peer"] is True
    st.apply(c.AdmitPeer("h5:8085:9005", 10.0))
    assert views.membership_pending(st, ["n1"]) == [
        {"id": "h5:9005", "change": "add", "peer": "h5:8085:9005"}]


def test_retire_refuses_a_live_peer_not_being_removed(st):
    assert not st.apply(c.RetirePeer("n1", 1.0)).ok
    assert "n1" in st.peers


def test_retiring_moves_the_sql_sessions_it_held(st):
    assert st.apply(c.OpenSqlSession("h1", "s", {}, "n2", 1.0, 10)).ok
    st.apply(c.RemovePeer("n2", 2.0))
    assert st.apply(c.RetirePeer("n2", 3.0)).ok
    assert st.sessions["h1"].node == "n1"


def test_a_batch_job_moves_only_with_restart(st):
    submit(st, "b1")
    assign(st, ("b1", "n1", 0))
    report(st, "b1", 1, "n1", S.RUNNING)
    plain = st.apply(c.MoveJobs((c.Move("b1", "n1", "n2", 1),), "drain", 5.0))
    assert not plain.value[0].ok
    forced = st.apply(c.MoveJobs((c.Move("b1", "n1", "n2", 1, True),), "drain-deadline", 5.0))
    assert forced.value[0].ok and st.jobs["b1"].move_to == "n2"


def test_drain_deadline_is_kept_and_cleared(st):
    assert st.apply(c.DrainPeer("n1", True, 1.0, 12.5)).ok
    assert st.peers["n1"].drain_deadline == 12.5
    assert st.apply(c.DrainPeer("n1", False, 2.0)).ok
    assert st.peers["n1"].drain_deadline is None


def test_overdue_jobs_skip_ending_and_moving_jobs(st):
    for j in ("b1", "b2", "b3"):
        submit(st, j)
    submit(st, "s1", **{"job-type": "streaming"})
    assign(st, ("b1", "n1", 0), ("b2", "n1", 0))
    assign(st, ("s1", "n2", 0), ("b3", "n2", 0))
    st.apply(c.CancelJob("b2", 4.0))
    report(st, "s1", 1, "n2", S.RUNNING)
    jobs = overdue_jobs(st, {"n1", "n2"})
    assert [(j.job_id, j.node, j.epoch) for j in jobs] == [("b1", "n1", 1), ("s1", "n2", 1),
                                                           ("b3", "n2", 1)]


def test_deadline_moves_place_what_fits_and_send_the_rest_anywhere():
    st = ClusterState()
    reg(st, "n1", slots=3)
    reg(st, "n2", slots=1)
    for j in ("b1", "b2", "s1"):
        submit(st, j, **({"job-type": "streaming"} if j == "s1" else {}))
    assign(st, ("b1", "n1", 0), ("b2", "n1", 0), ("s1", "n1", 0))
    st.apply(c.DrainPeer("n1", True, 5.0, 0.0))
    moves = deadline_moves(st, {"n1"}, "spread", None)
    assert sorted(m.job_id for m in moves) == ["b1", "b2", "s1"]
    placed = [m.job_id for m in moves if m.target == "n2"]
    anywhere = [m.job_id for m in moves if m.target == c.ANYWHERE]
    assert len(placed) == 1 and len(anywhere) == 2  # n2 has room for one
    res = st.apply(c.MoveJobs(tuple(c.Move(m.job_id, m.source, m.target, m.epoch, True)
                                    for m in moves), "drain-deadline", 6.0))
    assert all(r.ok for r in res.value)
    assert st.incoming == {"n2": {placed[0]: 1}}
    # the owner stops the job and releases it: it waits for room, as after a peer loss
    assert st.apply(c.ReleaseJob(anywhere[0], 1, "n1", 7.0)).ok
    assert st.jobs[anywhere[0]].status == S.CREATED and anywhere[0] in st.pending
    # ANYWHERE only with restart (a drain deadline)
    reg(st, "n3", slots=2)
    streaming_job = submit(st, "s4", **{"job-type": "streaming"})
    assert streaming_job.ok and assign(st, ("s4", "n3", 0)).ok
    refused = st.apply(c.MoveJobs((c.Move("s4", "n3", c.ANYWHERE, 1),), "x", 8.0)).value[0]
    assert not refused.ok and "does not take work" in refused.error


def test_old_snapshots_get_the_membership_tables():
    st = ClusterState()
    data = dict(st.__dict__)
    del data["joining"], data["removed"], data["removed_dead"]
    fresh = ClusterState.__new__(ClusterState)
    fresh.__setstate__(data)
    assert fresh.joining == {} and fresh.removed == {} and fresh.removed_dead == set()


@pytest.mark.parametrize("waited,has_entry,dead,connected,due", [
    (0.0, False, True, True, True),      # declared dead when removed: at once
    (0.0, False, False, False, True),    # the leader has no link to it: at once
    (0.0, False, False, True, False),    # live and connected: let it get its removal
    (0.4, True, False, True, False),     # it has it: one more heartbeat carries the commit
    (0.5, True, False, True, True),
    (4.9, False, False, True, False),
    (5.0, False, False, True, True),     # never acknowledged: cut off after CATCH_UP_WAIT
])
def test_removal_due(waited, has_entry, dead, connected, due):
    from jm.cluster.members.membership import removal_due
    assert removal_due(waited, has_entry, dead, connected) is due
