"""The SQL gateway's pure parts: statements (split, complete, what they do to a session),
Spark schemas as Flink column infos, the worker's messages, and sessions in the
replicated state (placement, moves with their peer's death, fencing of statements)."""
import struct

import pytest

from jm.policy.sql.sqlstmt import (READ, STATE, WRITE, classify, complete, split_statements,
                                   temp_views)
from jm.runtime.frames import read_frame
from jm.runtime import sqlproto as P
from jm.wire.sqlresult import columns, logical_type
from raft import commands as c
from raft.state import ClusterState
from jm.api import ResultPage
from rest.sql import result_json, results


@pytest.mark.parametrize("sql,kind", [
    ("SELECT 1", READ), ("  -- note\n select 1", READ), ("/* x */ WITH a AS (SELECT 1) "
                                                         "SELECT * FROM a", READ),
    ("WITH a AS (SELECT 1) INSERT INTO t SELECT * FROM a", WRITE),
    ("FROM src INSERT OVERWRITE TABLE t SELECT *", WRITE),
    ("(SELECT 1) UNION (SELECT 2)", READ), ("VALUES (1), (2)", READ), ("SHOW TABLES", READ),
    ("DESCRIBE t", READ), ("EXPLAIN SELECT 1", READ), ("CACHE TABLE t", READ),
    ("SET spark.sql.shuffle.partitions=2", STATE), ("SET spark.sql.shuffle.partitions", READ),
    ("SET", READ), ("SET -v", READ), ("SET TIME ZONE 'UTC'", STATE), ("SET a = 1", STATE), ("RESET", STATE), ("use db1", STATE),
    ("ADD JAR /a.jar", STATE), ("CREATE OR REPLACE TEMP VIEW v AS SELECT 1", STATE),
    ("CREATE GLOBAL TEMPORARY VIEW g AS SELECT 1", STATE),
    ("CREATE TEMPORARY FUNCTION f AS 'x.Y'", STATE), ("DROP TEMPORARY VIEW v", STATE),
    ("CACHE LAZY TABLE c AS SELECT 1", STATE), ("DROP VIEW v", STATE),
    ("DROP VIEW other", WRITE), ("CREATE VIEW v2 AS SELECT 1", WRITE),
    ("CREATE TABLE t AS SELECT 1", WRITE), ("INSERT INTO t VALUES (1)", WRITE),
    ("DROP TABLE t", WRITE), ("ALTER TABLE t ADD COLUMNS (x INT)", WRITE),
    ("TRUNCATE TABLE t", WRITE), ("MERGE INTO t USING s ON t.id = s.id", WRITE),
])
def test_classify(sql, kind):
    assert classify(sql, {"v"}) == kind


def test_split_statements_keeps_quotes_and_comments_apart():
    assert split_statements("SELECT ';' ; -- a;\nSELECT 2; /* ; */ ;  ") == [
        "SELECT ';'", "-- a;\nSELECT 2"]
    assert split_statements("SELECT `a;b` FROM t") == ["SELECT `a;b` FROM t"]
    assert split_statements(" ; ;") == []


def test_complete_needs_a_semicolon_outside_quotes():
    assert complete("SELECT 1;") and complete("SELECT 1; -- done")
    assert not complete("SELECT 1") and not complete("SELECT ';") and not complete("SELECT 1; x")


def test_temp_views_follow_creates_and_drops():
    assert temp_views(["CREATE TEMP VIEW a AS SELECT 1", "CACHE TABLE b AS SELECT 1",
                       "CREATE OR REPLACE TEMPORARY VIEW `C` AS SELECT 1",
                       "DROP VIEW IF EXISTS a"]) == {"b", "c"}


def test_logical_types():
    assert logical_type("integer", False) == {"type": "INTEGER", "nullable": False}
    assert logical_type("string")["type"] == "VARCHAR"
    assert logical_type("decimal(12,3)") == {"type": "DECIMAL", "nullable": True,
                                             "precision": 12, "scale": 3}
    assert logical_type("timestamp_ntz")["type"] == "TIMESTAMP_WITHOUT_TIME_ZONE"
    arr = logical_type({"type": "array", "elementType": "long", "containsNull": False})
    assert arr == {"type": "ARRAY", "nullable": True,
                   "elementType": {"type": "BIGINT", "nullable": False}}
    row = logical_type({"type": "struct", "fields": [{"name": "a", "type": "double",
                                                      "nullable": True}]})
    assert row["type"] == "ROW" and row["fields"][0]["fieldType"]["type"] == "DOUBLE"
    assert logical_type("weird")["type"] == "RAW"


def test_columns_and_results():
    schema = {"type": "struct", "fields": [{"name": "n", "type": "long", "nullable": False}]}
    cols = columns(schema)
    assert cols == [{"name": "n", "logicalType": {"type": "BIGINT", "nullable": False},
                     "comment": None}]
    assert results(cols, [[1], [2]])["data"] == [{"kind": "INSERT", "fields": [1]},
                                                 {"kind": "INSERT", "fields": [2]}]
    assert columns(None) == []


PATH = "/v2/sessions/s/operations/o/result/"


def test_a_result_not_ready_yet_in_flinks_json():
    assert result_json(ResultPage(3, ready=False, is_query=True), PATH, "PLAIN_TEXT") == {
        "resultType": "NOT_READY", "isQueryResult": True, "resultKind": "SUCCESS_WITH_CONTENT",
        "results": {"columns": [], "rowFormat": "JSON", "data": []},
        "nextResultUri": "/v2/sessions/s/operations/o/result/3?rowFormat=PLAIN_TEXT"}


def test_a_page_in_flinks_json_plain_text_as_strings():
    cols = ({"name": "n", "logicalType": {"type": "BIGINT", "nullable": True}, "comment": None},)
    page = ResultPage(1, ready=True, is_query=True, columns=cols, rows=([7, None],))
    assert result_json(page, PATH, "PLAIN_TEXT") == {
        "resultType": "PAYLOAD", "isQueryResult": True, "resultKind": "SUCCESS_WITH_CONTENT",
        "results": {"columns": list(cols), "rowFormat": "PLAIN_TEXT",
                    "data": [{"kind": "INSERT", "fields": ["7", None]}]},
        "nextResultUri": "/v2/sessions/s/operations/o/result/2?rowFormat=PLAIN_TEXT"}
    assert result_json(page, PATH, "JSON")["results"]["data"][0]["fields"] == [7, None]


def test_the_last_page_has_no_next_uri():
    page = ResultPage(0, ready=True, is_query=False, has_content=False, end=True)
    assert result_json(page, PATH, "JSON") == {
        "resultType": "EOS", "isQueryResult": False, "resultKind": "SUCCESS",
        "results": {"columns": [], "rowFormat": "JSON", "data": []}}


def test_worker_messages_round_trip():
    import io
    msgs = [P.OpenSession("s", {"a": "1"}, ("SET x=1",)), P.Execute("s", "o", "SELECT 1"),
            P.Fetch("o", 5), P.Cancel("o"), P.CloseOperation("o"), P.CloseSession("s", False),
            P.Reply(True, {"rows": [[1]]}), P.Reply(False, None, "boom")]
    stream = io.BytesIO(b"".join(P.CODEC.pack(m, i) for i, m in enumerate(msgs)))
    for i, m in enumerate(msgs):
        assert P.CODEC.unpack(read_frame(stream)) == (i, m)
    assert read_frame(stream) is None
    with pytest.raises(TypeError):
        P.CODEC.pack({"not": "a message"}, 1)
    # a child's reading loop: every request to the end of its input, an undecodable frame
    # skipped, a truncated last one the end
    junk = struct.pack(">I", 3) + b"\x93\x01\xc1"
    stream = io.BytesIO(P.CODEC.pack(msgs[0], 0) + junk + P.CODEC.pack(msgs[1], 1)
                        + P.CODEC.pack(msgs[2], 2)[:-1])
    assert list(P.CODEC.requests(stream)) == [(0, msgs[0]), (1, msgs[1])]


# ---- sessions in the replicated state -------------------------------------------------
@pytest.fixture
def st():
    s = ClusterState()
    for i, n in enumerate(("a", "b", "c")):
        assert s.apply(c.RegisterPeer(n, "h", 8000 + i, 9000 + i, 1, 2, 1.0)).ok
    return s


def open_(st, handle, node, limit=0):
    return st.apply(c.OpenSqlSession(handle, "", {"k": "v"}, node, 2.0, limit))


def test_open_close_and_limit(st):
    assert open_(st, "s1", "a").ok and open_(st, "s2", "a").ok
    again = open_(st, "s1", "b")  # a retried open is the same session
    assert again.ok and again.value == {"handle": "s1", "node": "a", "duplicate": True}
    full = open_(st, "s3", "a", limit=2)
    assert not full.ok and full.code == "full"
    assert st.apply(c.DeclarePeerDead("c", 3.0)).ok
    dead = open_(st, "s4", "c")
    assert not dead.ok and dead.code == "unavailable"
    assert st.apply(c.CloseSqlSessions(("s1", "nope"), 4.0)).value == ["s1"]
    assert set(st.sessions) == {"s2"}


def test_statements_are_fenced_by_holder_and_epoch(st):
    open_(st, "s1", "a")
    assert st.apply(c.AddSqlStatement("s1", "a", 1, "SET x=1", 3.0)).value == 1
    stale = st.apply(c.AddSqlStatement("s1", "b", 1, "SET y=1", 3.0))
    assert not stale.ok and stale.code == "stale"
    assert st.sessions["s1"].statements == ["SET x=1"]
    assert st.apply(c.AddSqlStatement("zz", "a", 1, "SET x=1", 3.0)).code == "not-found"


def test_a_dead_peers_sessions_move_to_the_least_loaded_live_peer(st):
    for h, n in (("s1", "a"), ("s2", "a"), ("s3", "b")):
        open_(st, h, n)
    st.apply(c.AddSqlStatement("s1", "a", 1, "USE db", 3.0))
    assert st.apply(c.DeclarePeerDead("a", 5.0)).ok
    moved = {h: (st.sessions[h].node, st.sessions[h].epoch) for h in ("s1", "s2")}
    assert moved == {"s1": ("c", 2), "s2": ("b", 2)}  # c had none; then b (1) ties c (1)
    assert st.sessions["s1"].statements == ["USE db"] and st.sessions["s1"].moves == 1
    # the old holder's late statement is refused
    assert st.apply(c.AddSqlStatement("s1", "a", 1, "SET z=1", 6.0)).code == "stale"


def test_sessions_wait_for_a_peer_when_none_is_alive():
    st = ClusterState()
    st.apply(c.RegisterPeer("a", "h", 1, 2, 1, 2, 1.0))
    open_(st, "s1", "a")
    st.apply(c.DeclarePeerDead("a", 5.0))
    assert st.sessions["s1"].node is None
    st.apply(c.RegisterPeer("b", "h", 3, 4, 1, 2, 6.0))
    assert st.sessions["s1"].node == "b"


def test_sessions_survive_the_codec_and_an_old_snapshot():
    import pickle
    cmd = c.OpenSqlSession("s", "n", {"a": "b"}, "x", 1.0, 3)
    assert c.decode(c.encode(cmd)) == cmd
    old = ClusterState()
    del old.__dict__["sessions"]
    assert pickle.loads(pickle.dumps(old)).sessions == {}


def test_operations_are_kept_for_the_next_holder_fenced_and_bounded(st):
    from raft.sessions import MAX_OPS_KEPT, MAX_STATEMENT_CHARS
    open_(st, "s1", "a")

    def start(op, node="a", epoch=1, text="SELECT 1"):
        res = st.apply(c.StartSqlOperations((c.SqlOperation("s1", op, node, epoch, text,
                                                            "read", 3.0),)))
        assert res.ok
        return res.value[0]
    assert start("o1").ok
    assert st.sessions["s1"].ops["o1"] == {"statement": "SELECT 1", "kind": "read",
                                           "epoch": 1, "node": "a"}
    assert start("o2", node="b").code == "stale"
    assert start("o3", text="x" * (MAX_STATEMENT_CHARS + 1)).ok  # kept, without its text
    assert st.sessions["s1"].ops["o3"]["statement"] is None
    for i in range(MAX_OPS_KEPT + 5):
        start(f"n{i}")
    ops = st.sessions["s1"].ops
    assert len(ops) == MAX_OPS_KEPT and f"n{MAX_OPS_KEPT + 4}" in ops and "o1" not in ops
    bad = st.apply(c.StartSqlOperations(("junk",)))
    assert bad.ok and bad.value[0].code == "invalid"


def test_which_sql_jobs_take_the_fast_path_and_their_result():
    from dataclasses import replace
    from jm.cluster.jobs.sqljobs import fast_path, job_result
    from jm.policy.jobs.runparams import RunParams
    base = RunParams(job_id="j", attempt=1, node="n", log_path="/l", result_path="/r",
                     error_path="/e", checkpoint_dir="/c", sql="SELECT 1",
                     spark_mode="connect", spark_remote="sc://h:1")
    assert fast_path(base)
    assert not fast_path(replace(base, streaming=True))
    assert not fast_path(replace(base, spark_mode="classic"))
    assert not fast_path(replace(base, spark_remote=None))  # no Spark here: the old error path
    assert not fast_path(replace(base, sql=None, entry="m:f"))
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": False}]}
    assert job_result({"schema": schema, "rows": [[1], [2], [3]]}, 2) == {
        "columns": ["id"], "rows": [[1], [2]], "truncated": True}
    assert job_result({"schema": schema, "rows": [[1]]}, 2)["truncated"] is False
