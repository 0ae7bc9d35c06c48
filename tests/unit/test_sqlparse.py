"""Statement classification with a Spark SQL parser (jm/policy/sql/sqlparse.py, the server's)
and the client's splitter (jm/policy/sql/sqlstmt.py): Spark's lexical rules (nested
bracketed comments, raw strings), a table of Spark and Flink SQL Client statements, and
the fallback to keyword rules for statements sqlglot does not know."""
import logging

import pytest

from jm.policy.sql import sqlparse, sqlstmt
from jm.policy.sql.sqlparse import READ, STATE, WRITE, classify, split_statements, temp_views

NESTED = "/* a /* b */ c; */ SELECT 1"
RAW = "SELECT r'x\\' AS s; SELECT 2"   # the text: SELECT r'x\' AS s; SELECT 2


# ---- the two regressions (the keyword lexer before issue 30 got both wrong) ------------

@pytest.mark.parametrize("split", [split_statements, sqlstmt.split_statements])
def test_bracketed_comments_nest(split):
    """Spark nests bracketed comments (SPARK-28880): the `;` is inside the comment."""
    assert split(NESTED) == [NESTED]
    assert split("/* /* */ ; */ SELECT 1; SELECT 2") == ["/* /* */ ; */ SELECT 1", "SELECT 2"]
    assert split("/*/ ; */ SELECT 3") == ["/*/ ; */ SELECT 3"]


def test_a_nested_comment_before_a_query_is_a_read():
    assert classify(NESTED) == READ
    assert sqlstmt.classify(NESTED) == READ


@pytest.mark.parametrize("split", [split_statements, sqlstmt.split_statements])
def test_raw_strings_have_no_escapes(split):
    """In r'...' (and R"...") a backslash is a backslash: the quote after it ends it."""
    assert split(RAW) == ["SELECT r'x\\' AS s", "SELECT 2"]
    assert split('SELECT R"a\\" ; SELECT 3') == ['SELECT R"a\\"', "SELECT 3"]
    # not a raw string: an identifier ending in r, then an ordinary string
    assert split("SELECT bar'x\\';y'") == ["SELECT bar'x\\';y'"]
    assert split("SELECT 'a\\';b'; SELECT 4") == ["SELECT 'a\\';b'", "SELECT 4"]


def test_a_write_after_a_raw_string_is_a_write():
    assert classify("SELECT r'x\\' AS s; DROP TABLE t") == WRITE
    assert classify(RAW) == READ


def test_the_client_completes_statements_by_the_same_rules():
    assert sqlstmt.complete("SELECT r'x\\';")
    assert not sqlstmt.complete("/* a /* b */ c; */")
    assert sqlstmt.complete("/* a /* b */ c */ SELECT 1;")


# ---- a table of statements -------------------------------------------------------------

@pytest.mark.parametrize("sql,kind", [
    # queries
    ("SELECT 1", READ), ("select * from `my db`.`a;b`", READ),
    ("WITH a AS (SELECT 1) SELECT * FROM a", READ), ("(SELECT 1) UNION (SELECT 2)", READ),
    ("VALUES (1), (2)", READ), ("TABLE t", READ), ("FROM src SELECT *", READ),
    ("SELECT /*+ BROADCAST(t) */ * FROM t TIMESTAMP AS OF '2020-01-01'", READ),
    ("WITH a AS (SELECT 1) SELECT 'INSERT' AS w FROM a", READ),  # a word in a string
    ("SHOW TABLES", READ), ("show create table t", READ), ("DESCRIBE t", READ),
    ("DESC TABLE EXTENDED t", READ), ("EXPLAIN SELECT 1", READ),
    ("EXPLAIN EXTENDED INSERT INTO t SELECT 1", READ),   # explained, not run
    ("LIST JARS", READ), ("CACHE TABLE t", READ), ("UNCACHE TABLE t", READ),
    ("REFRESH TABLE t", READ),
    # session state, Spark's and the Flink SQL Client's
    ("SET 'execution.runtime-mode' = 'batch'", STATE), ("SET 'key' = 'value'", STATE),
    ("RESET 'key'", STATE), ("RESET", STATE), ("SET spark.sql.shuffle.partitions=2", STATE),
    ("SET a = 1", STATE), ("SET TIME ZONE 'UTC'", STATE), ("SET VAR x = 1", STATE),
    ("DECLARE VARIABLE x INT DEFAULT 1", STATE), ("DROP TEMPORARY VARIABLE x", STATE),
    ("SET", READ), ("SET -v", READ), ("SET spark.sql.shuffle.partitions", READ),
    ("use db1", STATE), ("USE CATALOG c", STATE), ("ADD JAR /a.jar", STATE),
    ("CREATE OR REPLACE TEMP VIEW v AS SELECT 1", STATE),
    ("create or replace temporary view `My View` as select 1", STATE),
    ("CREATE GLOBAL TEMPORARY VIEW g AS SELECT 1", STATE),
    ("CREATE TEMPORARY VIEW pv USING parquet OPTIONS (path '/x')", STATE),
    ("CREATE TEMPORARY TABLE tt USING parquet OPTIONS (path '/x')", STATE),  # a temp view
    ("CREATE TEMPORARY FUNCTION f AS 'x.Y'", STATE),
    ("CREATE TEMPORARY FUNCTION f(x INT) RETURNS INT RETURN x + 1", STATE),
    ("CACHE LAZY TABLE c AS SELECT 1", STATE), ("CACHE TABLE c SELECT 1", STATE),
    ("DROP TEMPORARY VIEW v", STATE), ("DROP VIEW v", STATE), ("DROP VIEW IF EXISTS `V`", STATE),
    ("DROP TEMPORARY FUNCTION IF EXISTS f", STATE),
    # writes
    ("CREATE TABLE t AS SELECT 1", WRITE), ("CREATE TABLE t (a INT) USING delta", WRITE),
    ("INSERT INTO t VALUES (1)", WRITE), ("INSERT OVERWRITE TABLE t SELECT 1", WRITE),
    ("insert overwrite table `db`.`t` partition (p = 1) select * from s", WRITE),
    ("WITH a AS (SELECT 1) INSERT INTO t SELECT * FROM a", WRITE),
    ("FROM src INSERT OVERWRITE TABLE t SELECT *", WRITE),
    ("MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET *", WRITE),
    ("UPDATE t SET a = 1", WRITE), ("DELETE FROM t WHERE a = 1", WRITE),
    ("ALTER TABLE t ADD COLUMNS (x INT)", WRITE), ("TRUNCATE TABLE t", WRITE),
    ("DROP TABLE t", WRITE), ("DROP VIEW other", WRITE), ("DROP VIEW db.v", WRITE),
    ("CREATE VIEW v2 AS SELECT 1", WRITE), ("CREATE FUNCTION f AS 'x.Y'", WRITE),
    ("ANALYZE TABLE t COMPUTE STATISTICS", WRITE), ("COMMENT ON TABLE t IS 'x'", WRITE),
    ("CLEAR CACHE", WRITE), ("DECLARE x INT; SELECT 1; DROP TABLE t", WRITE),
    # comments before statements
    ("-- note\n select 1", READ), ("/* x */ WITH a AS (SELECT 1) SELECT * FROM a", READ),
    ("/* INSERT */ -- DROP\nSELECT 1", READ), ("-- c\nINSERT INTO t SELECT 1", WRITE),
    ("/* c */ SET 'k' = 'v'", STATE),
    # what sqlglot cannot parse: the keyword rules (never a write called a read)
    ("INSERT OVERWRITE DIRECTORY '/x' USING parquet SELECT 1", WRITE),
    ("MERGE INTO t USING s ON t.id = s.id", WRITE), ("REPLACE TABLE t AS SELECT 1", WRITE),
    ("MSCK REPAIR TABLE t", WRITE), ("OPTIMIZE t ZORDER BY (a)", WRITE), ("VACUUM t", WRITE),
    ("EXECUTE IMMEDIATE 'DROP TABLE t'", WRITE), ("CALL sys.proc()", WRITE),
    ("BEGIN DROP TABLE t; END", WRITE), ("LOAD DATA INPATH '/x' INTO TABLE t", WRITE),
    ("SELECT 'unterminated", READ), ("INSERT INTO t SELECT 'unterminated", WRITE),
    # several statements in one text: the most a statement does
    ("SELECT 1; SELECT 2", READ), ("SET a = 1; SELECT 1", STATE),
    ("SELECT 1; DROP TABLE t", WRITE), ("", READ), (" -- only a comment\n", READ),
])
def test_classify(sql, kind):
    assert classify(sql, {"v"}) == kind


def test_the_session_views_are_read_only_for_a_drop_view():
    asked = []

    def views():
        asked.append(1)
        return {"v"}
    assert classify("SELECT 1", views) == READ and classify("SHOW TABLES", views) == READ
    assert classify("DROP TEMPORARY VIEW v", views) == STATE and not asked
    assert classify("DROP VIEW v", views) == STATE and asked == [1]
    assert classify("DROP VIEW global_temp.v", {"v"}) == STATE


def test_temp_views_follow_creates_and_drops():
    assert temp_views(["CREATE TEMP VIEW a AS SELECT 1", "CACHE TABLE b AS SELECT 1",
                       "CREATE OR REPLACE TEMPORARY VIEW `C` AS SELECT 1",
                       "DROP VIEW IF EXISTS a", "CACHE TABLE d SELECT 2",
                       "CREATE GLOBAL TEMP VIEW g AS SELECT 1", "DROP VIEW global_temp.g",
                       "CREATE TEMPORARY VIEW e (x, y) AS SELECT 1, 2", "SET a = 1",
                       "CREATE TEMPORARY VIEW pv USING parquet OPTIONS (path '/x')",
                       "/* x; */ CREATE TEMP VIEW f AS SELECT 1; DROP VIEW e"]) \
        == {"b", "c", "d", "pv", "f"}


def test_long_texts_are_classified_by_keywords(monkeypatch):
    monkeypatch.setattr(sqlparse, "PARSE_MAX", 40)
    rows = ", ".join(["(1)"] * 20)
    assert classify(f"INSERT INTO t VALUES {rows}") == WRITE
    assert classify(f"SELECT 1 /* {rows} */; DROP TABLE t") == WRITE
    assert classify(f"VALUES {rows}") == READ
    assert temp_views([f"CREATE TEMP VIEW w AS VALUES {rows}"]) == {"w"}


def test_classify_never_raises_nor_logs(caplog):
    caplog.set_level(logging.DEBUG)
    for sql in ["SHOW TABLES", "(((((", "SELECT " + "(" * 3000 + "1" + ")" * 3000,
                "\x00", "`", "/*", "SELECT 1 FROM", "CREATE", "DROP VIEW", "CACHE TABLE"]:
        assert classify(sql, {"v"}) in (READ, STATE, WRITE)
        temp_views([sql])
    assert not [r for r in caplog.records if r.name.startswith("sqlglot")]
