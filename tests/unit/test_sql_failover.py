"""What a session's next holder answers for an operation its dead peer had started: the
end of a write kept in the session's record (raft/sessions.py) and the decision
(jm/policy/sql/sqlop.py `adoption`), pure."""
import pytest

from jm.policy.sql.sqlop import LOST_WRITE, Adoption, OpState, OpStatus, adoption
from raft import commands as c
from raft.state import ClusterState


@pytest.fixture
def st():
    s = ClusterState()
    for i, n in enumerate(("a", "b")):
        assert s.apply(c.RegisterPeer(n, "h", 8000 + i, 9000 + i, 1, 2, 1.0)).ok
    assert s.apply(c.OpenSqlSession("s1", "", {}, "a", 2.0)).ok
    return s


def op(st, op_id, kind="write", text="INSERT INTO t VALUES (1)", end="", error="",
       node="a", epoch=1):
    res = st.apply(c.StartSqlOperations((c.SqlOperation("s1", op_id, node, epoch, text, kind,
                                                        3.0, end, error),)))
    assert res.ok
    return res.value[0]


def test_the_end_of_a_write_is_kept_for_the_next_holder(st):
    assert op(st, "w1").ok
    assert op(st, "w1", end="FINISHED").ok
    assert st.sessions["s1"].ops["w1"]["end"] == "FINISHED"
    assert op(st, "w2").ok and op(st, "w2", end="ERROR", error="boom " * 2000).ok
    assert st.sessions["s1"].ops["w2"]["error"].startswith("boom") \
        and len(st.sessions["s1"].ops["w2"]["error"]) <= 4096


def test_an_end_is_fenced_and_must_name_a_started_operation(st):
    assert op(st, "w1").ok
    assert op(st, "w1", end="FINISHED", node="b").code == "stale"
    assert op(st, "nope", end="FINISHED").code == "not-found"
    assert op(st, "w1", end="MAYBE").code == "invalid"
    assert "end" not in st.sessions["s1"].ops["w1"]


def test_a_kept_session_statement_ends_its_operation(st):
    assert op(st, "v1", kind="state", text="SET x=1").ok
    assert st.apply(c.AddSqlStatement("s1", "a", 1, "SET x=1", 4.0, "v1")).ok
    assert st.sessions["s1"].ops["v1"]["end"] == "FINISHED"
    assert st.sessions["s1"].statements == ["SET x=1"]


def test_an_end_survives_the_codec():
    cmd = c.SqlOperation("s1", "w1", "a", 1, "", "write", 3.0, "ERROR", "table not found")
    assert c.decode(c.encode(cmd)) == cmd
    old = c.SqlOperation("s1", "w1", "a", 1, "SELECT 1", "read", 3.0)  # (no end: started)
    assert c.decode(c.encode(old)).end == ""


@pytest.mark.parametrize("record, then", [
    ({"statement": "SELECT 1", "kind": "read"}, Adoption(True)),
    ({"statement": "SET x=1", "kind": "state"}, Adoption(True)),  # not kept yet: run it
    ({"statement": "SET x=1", "kind": "state", "end": "FINISHED"},
     Adoption(False, OpState(OpStatus.FINISHED))),  # kept: replayed with the session
    ({"statement": "INSERT ...", "kind": "write"},
     Adoption(False, OpState(OpStatus.ERROR, LOST_WRITE))),
    ({"statement": "INSERT ...", "kind": "write", "end": "FINISHED"},
     Adoption(False, OpState(OpStatus.FINISHED))),
    ({"statement": "INSERT ...", "kind": "write", "end": "ERROR", "error": "no table"},
     Adoption(False, OpState(OpStatus.ERROR, "no table"))),
    ({"statement": None, "kind": "read"},  # too long to keep: cannot run it again
     Adoption(False, OpState(OpStatus.ERROR, LOST_WRITE))),
])
def test_what_the_next_holder_answers(record, then):
    assert adoption(record) == then
