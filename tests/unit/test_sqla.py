"""The pure parts of the SQLAlchemy dialect (jm/client/sqla/) and of the DB-API module
(jm/client/dbapi.py): the jm:// URL, Spark's DESCRIBE types, the SQL it writes, the
gateway's JSON values back to Python, rowcount, the CA file. The dialect through real
peers and Spark: tests/integration/test_sqlalchemy.py."""
import datetime
import decimal
import os
import tomllib

import pytest
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from jm.client import dbapi, sqla
from jm.client.sqlsession import Result

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("url, expected", [
    ("jm://h1:9000", {"addresses": "http://h1:9000"}),
    ("jm://h1", {"addresses": "http://h1:8081"}),
    ("jm://h1,h2:9000/db?peers=h3:1,h4&peers=h5:5",
     {"addresses": "http://h1:9000,http://h2:9000,http://h3:1,http://h4:8081,http://h5:5"}),
    ("jm://:tok@h1/?tls=1&cafile=/ca.pem&spark.sql.shuffle.partitions=4&name=bi&timeout=5",
     {"addresses": "https://h1:8081", "cafile": "/ca.pem", "token": "tok", "timeout": 5.0,
      "name": "bi", "properties": {"spark.sql.shuffle.partitions": "4"}}),
    ("jm://h1/?cafile=/ca.pem", {"addresses": "https://h1:8081", "cafile": "/ca.pem"}),
    ("jm://h1/?token=t&tls=0", {"addresses": "http://h1:8081", "token": "t"}),
    ("jm://[::1]:9/?peers=[::2]:7,[::3]",
     {"addresses": "http://[::1]:9,http://[::2]:7,http://[::3]:8081"}),
])
def test_the_url(url, expected):
    assert sqla.connect_args(make_url(url)) == expected


@pytest.mark.parametrize("url, words", [
    ("jm://", "names no peer"), ("jm:///db", "names no peer"),
    ("jm://h/?tls=maybe", "not a boolean"), ("jm://h/?bogus=1", "unknown option(s) bogus"),
    ("jm://h/?timeout=soon", "number of seconds"),
])
def test_a_bad_url_is_one_readable_line(url, words):
    with pytest.raises(sa_exc.ArgumentError) as e:
        sqla.connect_args(make_url(url))
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("text, type_, spec", [
    ("int", sa.INTEGER, "INTEGER"), ("bigint", sa.BIGINT, "BIGINT"),
    ("smallint", sa.SMALLINT, "SMALLINT"), ("tinyint", sa.SMALLINT, "SMALLINT"),
    ("string", sa.String, "STRING"), ("varchar(5)", sa.VARCHAR, "VARCHAR(5)"),
    ("double", sa.DOUBLE, "DOUBLE"), ("float", sa.REAL, "FLOAT"),
    ("decimal(10,2)", sa.DECIMAL, "DECIMAL(10, 2)"), ("date", sa.DATE, "DATE"),
    ("timestamp", sa.TIMESTAMP, "TIMESTAMP"), ("timestamp_ntz", sa.TIMESTAMP, "TIMESTAMP"),
    ("boolean", sa.BOOLEAN, "BOOLEAN"), ("binary", sa.BINARY, "BINARY"),
    ("array<int>", sqla.SparkType, "array<int>"),
    ("map<string,int>", sqla.SparkType, "map<string,int>"),
    ("struct<a:int,b:string>", sqla.SparkType, "struct<a:int,b:string>"),
    ("interval day to second", sqla.SparkType, "interval day to second"),
])
def test_describe_types(text, type_, spec):
    t = sqla.spark_type(text)
    assert isinstance(t, type_) and t.compile(dialect=sqla.JmDialect()) == spec
    if text.startswith("decimal"):
        assert (t.precision, t.scale) == (10, 2)


def test_the_sql_it_writes():
    d = sqla.JmDialect()
    t = sa.table("my table", sa.column("id"), sa.column("select"), schema="db")
    q = sa.select(t.c.id, t.c.select).where(t.c.select.like("a%")).limit(5).offset(2)
    c = q.compile(dialect=d)
    assert str(c).split() == ["SELECT", "db.`my", "table`.id,", "db.`my", "table`.`select`",
                              "FROM", "db.`my", "table`", "WHERE", "db.`my", "table`.`select`",
                              "LIKE", "%(select_1)s", "LIMIT", "%(param_1)s", "OFFSET",
                              "%(param_2)s"]
    assert "LIMIT" not in str(sa.select(t.c.id).offset(3).compile(dialect=d))  # not LIMIT -1
    assert "FLOOR" not in str(sa.select(t.c.id / 2).compile(dialect=d))  # `/` is true division
    bound = dbapi.bind(str(c), c.params)
    assert bound.endswith("LIKE 'a%'\n LIMIT 5\n OFFSET 2")
    ddl = str(sa.schema.CreateTable(sa.Table(
        "t", sa.MetaData(), sa.Column("s", sa.String), sa.Column("f", sa.Float),
        sa.Column("when", sa.DateTime), sa.Column("b", sa.LargeBinary))).compile(dialect=d))
    assert "s STRING" in ddl and "f DOUBLE" in ddl and "`when` TIMESTAMP" in ddl \
        and "b BINARY" in ddl


def test_values_back_to_python_by_column_type():
    ctx = sqla.JmExecutionContext()
    ctx.dialect = sqla.JmDialect()
    null = sa.types.NULLTYPE
    conv = {code: ctx.get_result_processor(null, "c", code) for code in sqla.WIRE}
    assert conv["DATE"]("2024-01-02") == datetime.date(2024, 1, 2)
    assert conv["TIMESTAMP_WITH_LOCAL_TIME_ZONE"]("2024-01-02T03:04:05.000006") == \
        datetime.datetime(2024, 1, 2, 3, 4, 5, 6)
    assert conv["DECIMAL"]("1.50") == decimal.Decimal("1.50")
    assert conv["VARBINARY"]("00ff") == b"\x00\xff"
    assert conv["DOUBLE"]("NaN") != conv["DOUBLE"]("NaN") and conv["DOUBLE"](1.5) == 1.5
    assert conv["DATE"](None) is None
    assert ctx.get_result_processor(null, "c", "BIGINT") is None
    # a typed column's own processor runs after: Numeric(asdecimal=False) gives a float
    f = ctx.get_result_processor(sa.Numeric(asdecimal=False), "c", "DECIMAL")
    assert f("2.25") == 2.25 and isinstance(f("2.25"), float)


class _Session:
    """A gateway session that answers each statement with one prepared first page."""

    def __init__(self, pages):
        self.pages = list(pages)

    def execute(self, sql):
        return Result(self, "op", self.pages.pop(0))

    def _get(self, uri):
        return self.pages.pop(0)

    def close_operation(self, op):
        pass


def _page(cols, rows, more=False, query=True):
    page = {"resultType": "PAYLOAD", "isQueryResult": query,
            "results": {"columns": [{"name": c, "logicalType": {"type": "BIGINT"}}
                                    for c in cols],
                        "data": [{"kind": "INSERT", "fields": r} for r in rows]}}
    if more:
        page["nextResultUri"] = "/next"
    return page


def test_rowcount():
    eos = {"resultType": "EOS", "results": {"columns": [], "data": []}}
    conn = dbapi.Connection(_Session([
        _page(["id"], [[1], [2]], more=True), _page(["id"], [[3]], more=True), eos,
        _page([], [], query=False),
        _page(["num_affected_rows", "num_inserted_rows"], [[7, 7]], query=False),
        _page(["id"], [], more=True), eos]))
    cur = conn.cursor()
    cur.execute("SELECT")
    assert cur.rowcount == -1 and cur.fetchmany(2) == [(1,), (2,)] and cur.rowcount == -1
    assert cur.fetchall() == [(3,)] and cur.rowcount == 3
    cur.execute("CREATE")      # no result: nothing reported
    assert cur.description is None and cur.rowcount == -1
    cur.execute("INSERT")      # Spark's count (Delta's DML reports it)
    assert cur.rowcount == 7 and cur.fetchall() == [(7, 7)] and cur.rowcount == 7
    cur.execute("SELECT")
    assert cur.fetchall() == [] and cur.rowcount == 0


def test_a_whole_first_page_is_the_result():
    """(the statement's answer with Prefer: return=representation: EOS with the rows)"""
    whole = dict(_page(["id"], [[1], [2]]), resultType="EOS")
    cur = dbapi.Connection(_Session([whole])).cursor()
    cur.execute("SELECT")
    assert [d[0] for d in cur.description] == ["id"]
    assert cur.fetchall() == [(1,), (2,)] and cur.rowcount == 2


@pytest.mark.parametrize("name, query", [
    ("SELECT 1", True), ("  with x AS (SELECT 1) SELECT * FROM x", True),
    ("select\n1", True), ("TABLE t", True), ("show tables", True),
    ("people", False), ("selections", False), ("select", False), ("table_1", False),
])
def test_a_querys_text_is_never_taken_for_a_tables_name(name, query):
    """(pandas.read_sql asks has_table of every query's text first)"""
    assert bool(sqla.QUERY_TEXT.match(name)) is query


def test_a_bad_ca_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "ca.pem"
    bad.write_text("not a certificate")
    for path in (str(bad), str(tmp_path / "missing.pem")):
        with pytest.raises(dbapi.InterfaceError, match="^cafile "):
            dbapi.connect("https://127.0.0.1:1", cafile=path)


def test_the_extra_and_the_entry_point_are_declared():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    assert project["entry-points"]["sqlalchemy.dialects"]["jm"] == "jm.client.sqla:JmDialect"
    assert any(r.startswith("sqlalchemy>=2") for r in project["optional-dependencies"]["test"])
    assert project["optional-dependencies"]["sqlalchemy"] == ["sqlalchemy>=1.4.54,<3"]
    assert sqla.JmDialect.import_dbapi() is dbapi
