"""Flink's SQL Client conversation, its pure parts: Flink's SET/RESET in Spark's syntax
(jm/policy/sql/flinksql.py) and completion hints (jm/policy/sql/sqlcomplete.py)."""
import pytest

from jm.policy.sql import flinksql, sqlcomplete
from jm.policy.sql.sqlparse import classify
from jm.policy.sql.sqlstmt import STATE


@pytest.mark.parametrize("flink,spark", [
    ("SET 'spark.sql.shuffle.partitions' = '3'", "SET spark.sql.shuffle.partitions=3"),
    ("set 'a.b'='c';", "SET a.b=c"),
    ("SET 'sql-client.execution.result-mode' = 'TABLEAU'",
     "SET `sql-client.execution.result-mode`=`TABLEAU`"),
    ("SET 'table.exec.mini-batch.enabled' = 'true' ;; ",
     "SET `table.exec.mini-batch.enabled`=`true`"),
    ("SET 'pipeline.name' = 'it''s; a `job`'", "SET `pipeline.name`=`it's; a ``job```"),
    ("SET 'k' = ''", "SET k="), ("SET 'k' = 'a--b'", "SET `k`=`a--b`"),
    ("SET 'spark.sql.session.timeZone' = 'America/New_York'",
     "SET spark.sql.session.timeZone=America/New_York"), ("SET 'a-b' = ''", "SET `a-b`="),
    ("SET '  k ' = ' v  '", "SET k=v"),  # Flink trims both
    ("-- a note\nSET 'k' = 'v' /* done */", "SET k=v"),
    ("RESET 'execution.runtime-mode'", "RESET `execution.runtime-mode`"),
    ("reset 'spark.sql.shuffle.partitions';", "RESET spark.sql.shuffle.partitions"),
    ("RESET", "RESET"), ("reset ;", "RESET"), ("RESET spark.sql.ansi.enabled",
                                               "RESET spark.sql.ansi.enabled"),
])
def test_flink_set_and_reset_become_spark_statements_answered_ok(flink, spark):
    t = flinksql.translate(flink)
    assert t is not None and t.statement == spark and t.answers_ok
    assert classify(t.statement) == STATE  # replicated, so replayed on the next peer


@pytest.mark.parametrize("sql", ["SET", "SET;", " set ; "])
def test_set_alone_lists_as_spark_does(sql):
    t = flinksql.translate(sql)
    assert t is not None and t.statement == "SET" and not t.answers_ok


@pytest.mark.parametrize("sql", [
    "SELECT 'SET ''a'' = ''b'''", "SET spark.sql.shuffle.partitions=2",
    "SET spark.sql.shuffle.partitions", "SET -v", "SET 'k'", "SET 'k' = v",
    "SET TIME ZONE 'UTC'", "RESET 'a' 'b'", "SHOW TABLES", "EXPLAIN SELECT 1", "",
    "SET 'a' = 'b'; SELECT 1",
])
def test_other_statements_are_left_as_they_are(sql):
    assert flinksql.translate(sql) is None


def test_the_ok_answer_is_flinks():
    assert flinksql.OK_ROWS == [["OK"]]
    assert [f["name"] for f in flinksql.OK_SCHEMA["fields"]] == ["result"]
    assert flinksql.OK_SCHEMA["fields"][0]["type"] == "string"


def _hints(sql, pos=None, tables=(), functions=()):
    ctx = sqlcomplete.context(sql, len(sql) if pos is None else pos)
    return None if ctx is None else sqlcomplete.candidates(ctx, tables, functions)


def test_keywords_match_the_word_at_the_position_in_its_case():
    assert _hints("sel") == ["select"]
    assert _hints("SEL") == ["SELECT"]
    assert _hints("SELECT * FR") == ["FROM"]
    assert _hints("SELECT * FR", functions=["from_json", "trim"]) == ["FROM", "from_json"]
    assert "SHOW" in _hints("SH") and "SHOW" not in _hints("SE")
    assert _hints("SELECT 1 AS x; ins") == ["insert"]
    # the position, not the end: the word before the cursor
    assert _hints("SELECT * FROM t WHERE x", pos=2) == ["SECOND", "SELECT", "SEMI", "SET", "SETS"]


def test_tables_come_first_where_a_table_is_wanted():
    tables = ["orders", "Other", "t"]
    assert _hints("SELECT * FROM ", tables=tables) == ["orders", "Other", "t"]
    assert _hints("SELECT * FROM o", tables=tables)[:2] == ["orders", "Other"]
    assert _hints("SELECT * FROM o", tables=tables)[2:4] == ["of", "offset"]
    assert _hints("SELECT O", tables=tables)[0] == "OF"  # a keyword first elsewhere
    assert _hints("DESCRIBE ", tables=tables) == ["orders", "Other", "t"]


def test_nothing_typed_gives_statement_heads_at_a_start_only():
    assert _hints("") == list(sqlcomplete.HEADS)
    assert "SELECT" in _hints("SELECT 1; ")
    assert _hints("SELECT x ") == []


def test_no_hints_inside_a_quote_or_a_comment():
    assert _hints("SELECT 'sel") is None
    assert _hints("SELECT 1 -- sel") is None
    assert _hints("SELECT /* sel") is None
    assert _hints("SELECT 'a' AS x FR") == ["FROM"]
    assert _hints("SELECT /* c */ x FR") == ["FROM"]


def test_no_repeats_and_names_keep_their_case():
    got = _hints("SELECT * FROM Ta", tables=["Tab", "tab2", "Tab"], functions=["tan"])
    assert got == ["Tab", "tab2", "TABLE", "TABLES", "TABLESAMPLE", "tan"]


@pytest.mark.parametrize("body,field", [
    ({}, "statement"), ({"position": 1}, "statement"), ({"statement": 3, "position": 0},
                                                        "statement"),
    ({"statement": "SELECT"}, "position"), ({"statement": "SELECT", "position": "2"},
                                            "position"),
    ({"statement": "SELECT", "position": True}, "position"),
    ({"statement": "SELECT", "position": 7}, "position 7 is out of range"),
    ({"statement": "SELECT", "position": -1}, "position -1 is out of range"),
    ([1], "JSON object"),
])
def test_bad_requests_name_the_field(body, field):
    with pytest.raises(sqlcomplete.BadRequest) as err:
        sqlcomplete.request(body)
    assert field in str(err.value)


def test_a_good_request():
    assert sqlcomplete.request({"statement": "SEL", "position": 3}) == ("SEL", 3)
    assert sqlcomplete.request({"statement": "", "position": 0}) == ("", 0)
