"""Livy's interactive sessions, pure parts: the replicated records (raft/livy.py: ids,
numbering, a request sent twice, fencing by holder and epoch, closing) and Livy's JSON
(jm/wire/livysessions.py: requests, states, outputs, their bound)."""
import json

import pytest

from jm.wire import livysessions as W
from raft import commands as c
from raft.records import ALIVE, PeerRecord
from raft.state import ClusterState

A, B = "127.0.0.1:1", "127.0.0.1:2"


def state_with_peers():
    st = ClusterState()
    for i, node in enumerate((A, B)):
        st.peers[node] = PeerRecord(node, "127.0.0.1", 8000 + i, 9000 + i, 1, 4, ALIVE)
    return st


def opened(st, handle="h1", kind="pyspark", node=A):
    res = st.apply(c.OpenLivySession(handle, kind, "nb", {}, node, 1.0, 0, ("a note",)))
    assert res.ok, res
    return res.value["id"]


def test_sessions_get_integer_ids_and_a_retried_opening_is_the_same_session():
    st = state_with_peers()
    assert opened(st, "h1") == 0 and opened(st, "h2") == 1
    assert opened(st, "h1") == 0  # the same request again
    assert st.sessions["h1"].livy.notes == ["a note"]
    res = st.apply(c.OpenLivySession("h3", "spark", "", {}, A, 1.0))
    assert not res.ok and res.code == "invalid"


def test_statements_are_numbered_once_fenced_and_ended_once():
    st = state_with_peers()
    n = opened(st)
    add = c.AddLivyStatement(n, A, 1, "x = 1", "pyspark", 2.0, "req-1")
    assert st.apply(add).value == 0
    assert st.apply(add).value == 0  # sent again after its answer was lost: one statement
    assert st.apply(c.AddLivyStatement(n, A, 1, "x", "pyspark", 3.0)).value == 1
    stale = st.apply(c.AddLivyStatement(n, B, 1, "y", "pyspark", 3.0))
    assert not stale.ok and stale.code == "stale"
    out = {"status": "ok", "execution_count": 0, "data": {"text/plain": ""}}
    assert not st.apply(c.EndLivyStatement(n, 0, A, 2, "available", out, 4.0)).ok
    assert st.apply(c.EndLivyStatement(n, 0, A, 1, "available", out, 4.0)).ok
    assert st.apply(c.EndLivyStatement(n, 0, A, 1, "cancelled", None, 5.0)).value == \
        "available"  # ended already: the first end stays
    assert not st.apply(c.EndLivyStatement(n, 1, A, 1, "done", None, 5.0)).ok
    livy = st.sessions["h1"].livy
    assert [s.id for s in livy.statements] == [0, 1]
    assert W.statement_states(livy) == {0: "available", 1: "running"}


def test_a_statement_s_states_change_only_as_the_table_says():
    """raft/livy.py's TRANSITIONS: a waiting statement runs or is cancelled; a running
    one ends (or is being cancelled); an end is final, whatever comes after it."""
    from raft.livy import ENDS, TRANSITIONS, StatementState as S, may_become
    assert set(TRANSITIONS) == set(S)
    for end in ENDS:
        assert not TRANSITIONS[end] and not any(may_become(end, to) for to in S)
    assert may_become(S.WAITING, S.CANCELLED) and not may_become(S.WAITING, S.AVAILABLE)
    assert {to for to in S if may_become(S.RUNNING, to)} == {S.CANCELLING, *ENDS}
    assert not may_become(S.CANCELLING, S.RUNNING)
    # the answer: cancelling only while its holder stops one that has not ended
    st = state_with_peers()
    n = opened(st)
    for code in ("x = 1", "y = 2"):
        st.apply(c.AddLivyStatement(n, A, 1, code, "pyspark", 2.0))
    st.apply(c.EndLivyStatement(n, 0, A, 1, "available", None, 3.0))
    livy = st.sessions["h1"].livy
    states = W.statement_states(livy)
    assert [W.statement_json(x, states[x.id], cancelling=True)["state"]
            for x in livy.statements] == ["available", "cancelling"]
    assert W.statement_json(livy.statements[1], states[1])["state"] == "running"


def test_a_move_fences_the_old_holder_and_closing_forgets_the_id():
    from raft.sessions import move_sessions_of
    st = state_with_peers()
    n = opened(st)
    st.apply(c.AddLivyStatement(n, A, 1, "x = 1", "pyspark", 2.0))
    move_sessions_of(st, A, 3.0)
    s = st.sessions["h1"]
    assert s.node == B and s.epoch == 2
    assert st.apply(c.EndLivyStatement(n, 0, A, 1, "available", None, 4.0)).code == "stale"
    assert st.apply(c.EndLivyStatement(n, 0, B, 2, "available", None, 4.0)).ok
    st.apply(c.CloseSqlSessions(("h1",), 5.0))
    assert n not in st.livy_ids
    assert st.apply(c.AddLivyStatement(n, B, 2, "x", "pyspark", 6.0)).code == "not-found"


def test_ended_statements_beyond_the_bound_go_first():
    from raft import livy as L
    st = state_with_peers()
    n = opened(st)
    for i in range(L.MAX_STATEMENTS_KEPT + 5):
        st.apply(c.AddLivyStatement(n, A, 1, f"{i}", "sql", 1.0))
        if i != 2:
            st.apply(c.EndLivyStatement(n, i, A, 1, "available", None, 1.0))
    ids = [s.id for s in st.sessions["h1"].livy.statements]
    assert len(ids) == L.MAX_STATEMENTS_KEPT and 2 in ids and ids[-1] == 204


def test_a_request_is_livy_s_when_it_has_livy_fields_and_no_flink_ones():
    assert W.is_livy_request({"kind": "pyspark"})
    assert W.is_livy_request({"conf": {}, "name": "x"})
    assert not W.is_livy_request({}) and not W.is_livy_request(None)
    assert not W.is_livy_request({"properties": {}, "sessionName": "x"})
    assert not W.is_livy_request({"kind": "sql", "properties": {}})


def test_session_requests_name_every_problem():
    r = W.session_request({"kind": "sql", "conf": {"a": 1}, "executorCores": 2})
    assert r.kind == "sql" and r.conf == {"a": "1"} and "executorCores" in r.notes[0]
    assert W.session_request({"name": "x"}).kind == "shared"
    with pytest.raises(ValueError) as e:
        W.session_request({"kind": "sparkr", "proxyUser": "Bob!", "conf": [], "bogus": 1})
    errors = e.value.args[0]
    assert len(errors) == 4 and "R code" in errors[1] and "proxyUser must be" in errors[2]
    assert W.session_request({"proxyUser": "etl"}).proxy_user == "etl"
    assert W.statement_request({"code": "1"}, "sql") == ("1", "sql")
    assert W.statement_request({"code": "1", "kind": "sql"}, "pyspark") == ("1", "sql")
    for body, kind in (({"code": "1"}, "shared"), ({"code": 1}, "sql"),
                       ({"code": "1", "kind": "spark"}, "sql"), ([], "sql")):
        with pytest.raises(ValueError):
            W.statement_request(body, kind)


def test_outputs_are_livy_s_and_bounded():
    out = W.sql_output(3, None, [[i] for i in range(W.SQL_ROWS + 10)])
    assert out["execution_count"] == 3
    assert len(out["data"]["application/json"]["data"]) == W.SQL_ROWS
    big = W.sql_output(0, None, [["x" * 1000] for _ in range(1000)])
    cut = W.bounded(big)
    assert len(json.dumps(cut)) <= W.MAX_OUTPUT
    assert 0 < len(cut["data"]["application/json"]["data"]) < 1000
    assert "output cut" in cut["data"]["text/plain"]
    text = W.bounded({"status": "ok", "data": {"text/plain": "y" * (W.MAX_OUTPUT * 2)}})
    assert len(json.dumps(text)) <= W.MAX_OUTPUT and "output cut" in text["data"]["text/plain"]
    small = W.error_output(1, "E", "v", ("a",))
    assert W.bounded(small) is small
