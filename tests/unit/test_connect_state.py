"""Spark Connect endpoint sessions in the replicated state (raft/connect.py)."""
from __future__ import annotations

from raft import commands as c, protocol
from raft.state import ClusterState

A, B = "127.0.0.1:1", "127.0.0.1:2"


def state():
    st = ClusterState()
    for node, pid in ((A, 1), (B, 2)):
        assert st.apply(c.RegisterPeer(node, "127.0.0.1", 8000, 9000, pid, 8, 0.0,
                                       connect_port=15002)).ok
    return st


def test_a_session_opens_once_and_belongs_to_its_opener():
    st = state()
    assert st.apply(c.OpenConnectSession("s1", A, 1.0, "t", "ana", "ana-os")).ok
    again = st.apply(c.OpenConnectSession("s1", A, 2.0, "t", "ana", "ana-os"))
    assert again.ok and again.value == {"duplicate": True}
    other = st.apply(c.OpenConnectSession("s1", B, 2.0, "t", "bo"))
    assert not other.ok and other.code == "exists"
    rec = st.connect["s1"]
    assert (rec.node, rec.tenant, rec.submitter, rec.user_id) == (A, "t", "ana", "ana-os")
    assert st.peers[A].connect_port == 15002


def test_bad_ids_a_dead_peer_and_the_peer_limit_are_refused():
    st = state()
    for bad in ("", "x" * 257, 7):
        res = st.apply(c.OpenConnectSession(bad, A, 1.0))
        assert not res.ok and res.code == "invalid"
    res = st.apply(c.OpenConnectSession("s", "127.0.0.1:9", 1.0))
    assert not res.ok and res.code == "unavailable"
    assert st.apply(c.OpenConnectSession("s1", A, 1.0, limit=2)).ok
    assert st.apply(c.OpenConnectSession("s2", A, 1.0, limit=2)).ok
    res = st.apply(c.OpenConnectSession("s3", A, 1.0, limit=2))
    assert not res.ok and res.code == "full" and "max-sessions" in res.error
    assert st.apply(c.OpenConnectSession("s3", B, 1.0, limit=2)).ok


def test_connect_sessions_count_against_the_tenants_session_quota():
    st = state()
    st.apply(c.SetTenant("t", None, 2, 1.0))
    assert st.apply(c.OpenSqlSession("h1", "", {}, A, 1.0, 0, "t", "ana")).ok
    assert st.apply(c.OpenConnectSession("s1", A, 1.0, "t", "ana")).ok
    res = st.apply(c.OpenConnectSession("s2", B, 1.0, "t", "ana"))
    assert not res.ok and res.code == "quota" and "holds 2 sessions" in res.error
    res = st.apply(c.OpenSqlSession("h2", "", {}, A, 1.0, 0, "t", "ana"))
    assert not res.ok and res.code == "quota"
    assert st.apply(c.CloseConnectSessions(("s1",), A, 2.0)).value == ["s1"]
    assert st.apply(c.OpenConnectSession("s2", B, 2.0, "t", "ana")).ok


def test_a_close_from_another_peer_closes_nothing():
    st = state()
    st.apply(c.OpenConnectSession("s1", A, 1.0))
    assert st.apply(c.CloseConnectSessions(("s1", "nope"), B, 2.0)).value == []
    assert "s1" in st.connect


def test_sessions_end_with_their_peer():
    st = state()
    for sid, node in (("a1", A), ("a2", A), ("b1", B)):
        st.apply(c.OpenConnectSession(sid, node, 1.0))
    assert st.apply(c.RegisterPeer(A, "127.0.0.1", 8000, 9000, 11, 8, 2.0)).ok  # restarted
    assert set(st.connect) == {"b1"}
    assert st.peers[A].connect_port == 0  # (this incarnation has no endpoint)
    st.apply(c.OpenConnectSession("a3", A, 3.0))
    assert st.apply(c.DeclarePeerDead(A, 4.0)).ok
    assert set(st.connect) == {"b1"}


def test_a_cluster_of_an_older_protocol_refuses_the_commands():
    st = ClusterState()
    st.apply(c.RegisterPeer(A, "127.0.0.1", 8000, 9000, 1, 8, 0.0, protocol=6,
                            connect_port=15002))
    assert st.protocol == 6 and st.peers[A].connect_port == 15002  # (announced)
    assert protocol.masked(c.OpenConnectSession("s", A, 1.0), 6) is None
    assert not st.apply(c.OpenConnectSession("s", A, 1.0)).ok
    assert st.connect == {}


def test_an_older_snapshot_has_no_connect_table():
    st = ClusterState()
    data = dict(st.__dict__)
    del data["connect"]
    old = ClusterState.__new__(ClusterState)
    old.__setstate__(data)
    assert old.connect == {}
