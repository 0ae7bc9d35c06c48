"""SQLAlchemy (jm/client/sqla/, found through its entry point) and pandas over the DB-API
module, through real peers and a real Spark Connect server: statements, Python values,
pandas.read_sql without a warning, Spark's missing transactions, reflection of a parquet
table, a view and a temporary view, the DB-API's rowcount, and https with a private CA
(`cafile`). One cluster serves the module (Spark starts once)."""
import datetime
import decimal
import json
import os
import shutil
import subprocess
import warnings
from typing import Any

import pandas
import pytest
import sqlalchemy as sa   # the test extra has it (as jm-cluster[sqlalchemy])

from jm.client import dbapi
from jm.runtime.ports import free_port

from tests.conftest import InProcessCluster
from tests.helpers import ROOT, http, poll

pytestmark = pytest.mark.slow

SETTINGS = {"sql-gateway.page-rows": 4, "sql-gateway.fetch-wait": "200 ms",
            "spark.driver.memory": "512m"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Two peers (the first runs the Spark Connect server), on a loop of their own: the
    tests call the blocking clients directly."""
    with InProcessCluster(str(tmp_path_factory.mktemp("sqla")), 2, SETTINGS, spark=True) as c:
        yield c


def jm_url(c, query: str = "") -> str:
    """jm://first-peer/?peers=second-peer"""
    hosts = [u.split("://", 1)[1] for u in c.urls]
    return f"jm://{hosts[0]}/?peers={','.join(hosts[1:])}" + (f"&{query}" if query else "")


@pytest.fixture(scope="module")
def engine(cluster):
    e = sa.create_engine(jm_url(cluster))
    yield e
    e.dispose()


def test_statements_values_pandas_and_no_transactions(engine):
    assert engine.dialect.name == "jm" and type(engine.dialect).__module__ == "jm.client.sqla"
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT id, CAST(id AS STRING) AS s, date_add(DATE'2024-01-02', CAST(id AS INT)) AS d,"
            " CAST(id AS DECIMAL(10, 2)) / 4 AS q, TIMESTAMP_NTZ'2024-01-02 03:04:05' AS ts,"
            " id % 2 = 0 AS even FROM range(:n) WHERE CAST(id AS STRING) LIKE '%' ORDER BY id"),
            {"n": 6}).all()
        assert len(rows) == 6
        assert rows[5] == (5, "5", datetime.date(2024, 1, 7), decimal.Decimal("1.250000"),
                           datetime.datetime(2024, 1, 2, 3, 4, 5), False)
        assert conn.execute(sa.text("SELECT :s AS s"), {"s": "it's 100%"}).scalar() == \
            "it's 100%"   # quoted on the client
        assert conn.exec_driver_sql("SELECT 'a%' AS p").scalar() == "a%"  # sent as it is
        # a connection is a gateway session: its temporary views stay for its statements
        conn.exec_driver_sql("CREATE OR REPLACE TEMP VIEW sqla_nums AS SELECT id FROM range(9)")
        assert conn.execute(sa.text("SELECT count(*) FROM sqla_nums")).scalar() == 9
        conn.commit()      # Spark SQL has no transactions: these do nothing, and break nothing
        conn.execute(sa.text("SELECT 1"))
        conn.rollback()
        assert conn.execute(sa.text("SELECT count(*) FROM sqla_nums")).scalar() == 9
        with pytest.raises(sa.exc.ProgrammingError, match="no_such_table"):
            conn.execute(sa.text("SELECT * FROM no_such_table"))
    with engine.begin() as conn:
        assert conn.execute(sa.select(sa.literal(2) * 3)).scalar() == 6
    assert engine.dialect.default_schema_name == "default"
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # pandas warns for a DB-API connection, not an engine
        sent = []

        def note(conn, cursor, statement, *rest):
            sent.append(statement)
        sa.event.listen(engine, "before_cursor_execute", note)
        query = "SELECT id, id * 2 AS twice FROM range(10) ORDER BY id"
        df = pandas.read_sql(query, engine)
        sa.event.remove(engine, "before_cursor_execute", note)
        assert list(df.columns) == ["id", "twice"] and df["twice"].tolist() == \
            [2 * i for i in range(10)]
        assert sent == [query]  # (not a SHOW TABLES first: its has_table(query) is False)
        df = pandas.read_sql(sa.text("SELECT id FROM range(:n)"), engine, params={"n": 3})
        assert df["id"].tolist() == [0, 1, 2]
    with engine.connect() as conn:   # (what the engine spares: the warning for a raw one)
        with pytest.warns(UserWarning, match="SQLAlchemy connectable"):
            pandas.read_sql("SELECT 1 AS one", conn.connection.dbapi_connection)


def test_reflection(engine, tmp_path):
    with engine.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE IF NOT EXISTS sqla_db LOCATION '{tmp_path}/db'")
        conn.exec_driver_sql(
            "CREATE TABLE sqla_db.people (id INT, name STRING, score DOUBLE, "
            "price DECIMAL(10,2), born DATE, seen TIMESTAMP, ok BOOLEAN, big BIGINT, "
            "tags ARRAY<STRING>, attrs MAP<STRING,INT>, addr STRUCT<city:STRING,zip:INT>) "
            "USING parquet")
        conn.exec_driver_sql(
            "INSERT INTO sqla_db.people VALUES (1, 'ann', 1.5, 2.25, DATE'1990-01-02', "
            "TIMESTAMP'2024-01-02 03:04:05', true, 10, array('a'), map('k', 1), "
            "named_struct('city', 'x', 'zip', 7)), (2, 'bob', NULL, NULL, NULL, NULL, false, "
            "NULL, NULL, NULL, NULL)")
        conn.exec_driver_sql("CREATE VIEW sqla_db.ann AS SELECT id, name FROM sqla_db.people "
                             "WHERE name = 'ann'")
        conn.exec_driver_sql("CREATE OR REPLACE TEMP VIEW sqla_tmp AS SELECT 1 AS one")
        insp = sa.inspect(conn)   # this session: its temporary view is there
        assert {"default", "sqla_db"} <= set(insp.get_schema_names())
        assert insp.get_table_names(schema="sqla_db") == ["people"]
        assert insp.get_view_names(schema="sqla_db") == ["ann"]
        assert "sqla_tmp" in insp.get_view_names() and "sqla_tmp" not in insp.get_table_names()
        assert "sqla_tmp" in insp.get_temp_view_names()
        assert [(c["name"], type(c["type"]).__name__) for c in insp.get_columns("sqla_tmp")] \
            == [("one", "INTEGER")]
        assert insp.has_table("sqla_tmp")

    insp = sa.inspect(engine)
    assert insp.has_table("people", schema="sqla_db") and insp.has_table("ann", schema="sqla_db")
    assert not insp.has_table("nope", schema="sqla_db")
    assert not insp.has_table("people", schema="no_such_db")
    cols = {c["name"]: c["type"] for c in insp.get_columns("people", schema="sqla_db")}
    assert list(cols) == ["id", "name", "score", "price", "born", "seen", "ok", "big", "tags",
                          "attrs", "addr"]
    assert isinstance(cols["id"], sa.INTEGER) and isinstance(cols["big"], sa.BIGINT)
    assert isinstance(cols["name"], sa.String) and isinstance(cols["score"], sa.DOUBLE)
    assert isinstance(cols["price"], sa.DECIMAL) and \
        (cols["price"].precision, cols["price"].scale) == (10, 2)
    assert isinstance(cols["born"], sa.DATE) and isinstance(cols["seen"], sa.TIMESTAMP)
    assert isinstance(cols["ok"], sa.BOOLEAN)
    assert [str(cols[k].compile(dialect=engine.dialect)) for k in ("tags", "attrs", "addr")] \
        == ["array<string>", "map<string,int>", "struct<city:string,zip:int>"]
    with pytest.raises(sa.exc.NoSuchTableError):
        insp.get_columns("nope", schema="sqla_db")

    people = sa.Table("people", sa.MetaData(), schema="sqla_db", autoload_with=engine)
    with engine.connect() as conn:
        row = conn.execute(sa.select(people).where(people.c.id == 1)).one()
    assert row.born == datetime.date(1990, 1, 2) and row.price == decimal.Decimal("2.25")
    assert row.seen == datetime.datetime(2024, 1, 2, 3, 4, 5) and row.ok is True
    assert row.tags == ["a"] and row.attrs == {"k": 1} and row.addr == {"city": "x", "zip": 7}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = pandas.read_sql_table("people", engine, schema="sqla_db")
    assert sorted(df["name"]) == ["ann", "bob"]


def test_dbapi_rowcount(cluster, tmp_path):
    with dbapi.connect(cluster.urls) as conn:
        cur = conn.cursor()
        cur.execute("SELECT id FROM range(10)")   # pages of 4: the count is known at the end
        assert cur.rowcount == -1
        assert len(cur.fetchmany(5)) == 5 and cur.rowcount == -1
        assert len(cur.fetchall()) == 5 and cur.rowcount == 10
        cur.execute("SELECT id FROM range(0)")
        assert cur.fetchall() == [] and cur.rowcount == 0
        cur.execute("CREATE OR REPLACE TEMP VIEW rc AS SELECT 1 AS one")
        assert cur.description is None and cur.rowcount == -1
        # Spark reports no count for an INSERT into a parquet table: -1 (PEP 249)
        cur.execute(f"CREATE TABLE rc_t (id BIGINT) USING parquet LOCATION '{tmp_path}/rc'")
        try:
            cur.execute("INSERT INTO rc_t SELECT id FROM range(3)")
            assert cur.rowcount == -1
            cur.execute("SELECT * FROM rc_t")
            assert len(list(cur)) == 3 and cur.rowcount == 3
        finally:
            cur.execute("DROP TABLE rc_t")


def test_a_url_without_a_peer_is_one_readable_line():
    with pytest.raises(sa.exc.ArgumentError) as e:
        sa.create_engine("jm://")
    assert "names no peer" in str(e.value) and "jm://" in str(e.value)
    assert "\n" not in str(e.value)
    with pytest.raises(sa.exc.ArgumentError, match="unknown option"):
        sa.create_engine("jm://127.0.0.1:1/?tsl=1")


def test_https_with_a_private_ca(cluster, tmp_path):
    """A TLS peer with its own CA (using the module's Spark server): the DB-API with
    `cafile`, SQLAlchemy with `?cafile=` (https then), and without the CA: refused."""
    from tests.integration.test_tls import make_pki, tls_settings
    pki = make_pki(str(tmp_path))
    remote = cluster.peers[1].conf["spark.remote"]
    with InProcessCluster(str(tmp_path / "tls"), 1,
                          {**tls_settings(pki), **SETTINGS, "spark.remote": remote}) as c:
        url = c.urls[0].replace("http://", "https://")
        with dbapi.connect(url, cafile=pki["ca"]) as conn:
            cur = conn.cursor()
            cur.execute("SELECT 40 + 2 AS x")
            assert cur.fetchall() == [(42,)]
        with pytest.raises(dbapi.OperationalError, match="(?i)certificate_verify_failed"):
            dbapi.connect(url, timeout=2)
        e = sa.create_engine(f"jm://{url.split('://', 1)[1]}/?cafile={pki['ca']}")
        try:
            with e.connect() as conn:
                assert conn.execute(sa.text("SELECT 'tls' AS t")).scalar() == "tls"
        finally:
            e.dispose()


SUPERSET = os.path.join(ROOT, ".cache", "superset")  # (bin/test.sh makes it there)
SCRIPT_14 = """
import datetime, decimal, sys
import sqlalchemy as sa
assert sa.__version__.startswith("1.4."), sa.__version__
engine = sa.create_engine(sys.argv[1])
with engine.connect() as c:
    row = c.execute(sa.text("SELECT :n + 1 AS n, DATE'2024-02-29' AS d, "
                            "CAST(1.5 AS DECIMAL(4,2)) AS x"), {"n": 41}).one()
    assert (row.n, row.d, row.x) == (42, datetime.date(2024, 2, 29), decimal.Decimal("1.50"))
    c.exec_driver_sql("CREATE OR REPLACE TEMPORARY VIEW v14 AS "
                      "SELECT id, id * 2 AS twice FROM range(5)")
    t = sa.Table("v14", sa.MetaData(), autoload_with=c)
    assert [col.name for col in t.columns] == ["id", "twice"], t.columns
    got = c.execute(sa.select(t.c.twice).where(t.c.id > 2).order_by(t.c.id).limit(5)).all()
    assert [r[0] for r in got] == [6, 8], got
    assert "default" in sa.inspect(c).get_schema_names()
print("ok", sa.__version__)
"""


@pytest.fixture(scope="module")
def superset_env(tmp_path_factory):
    """Apache Superset's released version in its own environment (SQLAlchemy 1.4), with the
    light client built from these sources installed into it as a BI user would:
    `pip install jm-client[sqlalchemy]` (the dialect found through its entry point)."""
    from tests.superset_env import python, ready
    if not ready(SUPERSET):
        pytest.skip(f"Superset's environment is not in {SUPERSET} (bin/test.sh makes it: "
                    "tests/superset_env.py)")
    out = str(tmp_path_factory.mktemp("client"))
    r = subprocess.run([os.path.join(ROOT, "bin", "build-client.sh"), out],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    wheel = r.stdout.strip().splitlines()[-1]
    r = subprocess.run([python(SUPERSET), "-m", "pip", "install", "-q", "--no-deps",
                        "--force-reinstall", wheel], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return python(SUPERSET)


def test_the_dialect_works_with_sqlalchemy_1_4_too(cluster, superset_env):
    """Superset's released versions pin SQLAlchemy 1.4: the same statements, values and
    reflection with it (the published client in Superset's environment)."""
    r = subprocess.run([superset_env, "-W", "error::DeprecationWarning", "-c", SCRIPT_14,
                        jm_url(cluster)], env=dict(os.environ, PYTHONPATH=""),
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and r.stdout.startswith("ok 1.4."), r.stderr[-3000:]


class Superset:
    """Apache Superset's server (gunicorn, as its docs run it) on a copy of the template
    metadata database, spoken to through its REST API as its web UI does."""

    def __init__(self, home: str):
        from tests.superset_env import ADMIN, env
        self.port, self.admin = free_port(), ADMIN
        db = os.path.join(home, "superset.db")
        shutil.copyfile(os.path.join(SUPERSET, "superset.db"), db)
        self.log = open(os.path.join(home, "superset.log"), "w")
        self.proc = subprocess.Popen(
            [os.path.join(SUPERSET, "venv", "bin", "gunicorn"), "-w", "1", "--threads", "4",
             "-b", f"127.0.0.1:{self.port}", "--timeout", "300", "superset.app:create_app()"],
            env=env(home, db), cwd=home, stdout=self.log, stderr=subprocess.STDOUT)
        self.token = None

    def call(self, method: str, path: str, body=None) -> tuple[int, Any]:
        auth = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return http(method, f"http://127.0.0.1:{self.port}{path}", body, auth, timeout=120)

    def started(self, timeout: float = 180) -> None:
        def up():   # (an exited server ends the wait at once)
            return self.proc.poll() is not None or self.call("GET", "/health")[0] == 200
        try:
            poll(up, timeout, what="Superset's /health")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {self.tail()}") from None
        assert self.proc.poll() is None, f"Superset exited: {self.tail()}"
        s, b = self.call("POST", "/api/v1/security/login", {
            "username": self.admin[0], "password": self.admin[1], "provider": "db"})
        assert s == 200, b
        self.token = b["access_token"]

    def tail(self) -> str:
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()[-3000:]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def test_superset_tests_the_connection_and_draws_a_chart_through_jm(
        cluster, superset_env, tmp_path):
    """A BI user's first hour with Superset's released version: the database's connection
    test, the database added, a dataset of SQL, a chart on it and the chart's data, all
    answered by Spark through the gateway (the dialect of the published client)."""
    url = jm_url(cluster)
    superset = Superset(str(tmp_path))
    try:
        superset.started()
        s, b = superset.call("POST", "/api/v1/database/test_connection/",
                             {"database_name": "spark", "sqlalchemy_uri": url})
        assert s == 200 and b.get("message") == "OK", b
        s, b = superset.call("POST", "/api/v1/database/test_connection/",
                             {"database_name": "nowhere", "sqlalchemy_uri":
                              f"jm://127.0.0.1:{free_port()}/?timeout=2"})
        assert s == 400 and "cannot reach" in b["errors"][0]["message"], b  # (said why)
        s, b = superset.call("POST", "/api/v1/database/",
                             {"database_name": "spark", "sqlalchemy_uri": url})
        assert s == 201, b
        db = b["id"]
        s, b = superset.call("GET", f"/api/v1/database/{db}/schemas/")
        assert s == 200 and "default" in b["result"], b
        sql = ("SELECT * FROM VALUES ('north', 3), ('south', 4), ('north', 5), ('east', 1) "
               "AS sales(region, amount)")
        s, b = superset.call("POST", "/api/v1/dataset/", {
            "database": db, "schema": "default", "table_name": "sales", "sql": sql})
        assert s == 201, b
        dataset = b["id"]
        s, b = superset.call("GET", f"/api/v1/dataset/{dataset}")
        assert s == 200, b
        assert [c["column_name"] for c in b["result"]["columns"]] == ["region", "amount"], b
        context = {"datasource": {"id": dataset, "type": "table"}, "force": True,
                   "queries": [{"columns": ["region"],
                                "metrics": [{"expressionType": "SQL", "label": "total",
                                             "sqlExpression": "SUM(amount)"}],
                                "orderby": [["total", False]], "row_limit": 10}],
                   "result_format": "json", "result_type": "full"}
        s, b = superset.call("POST", "/api/v1/chart/", {
            "slice_name": "sales by region", "viz_type": "table", "datasource_id": dataset,
            "datasource_type": "table", "query_context": json.dumps(context),
            "params": json.dumps({"groupby": ["region"], "metrics": ["total"]})})
        assert s == 201, b
        s, b = superset.call("GET", f"/api/v1/chart/{b['id']}/data/")
        assert s == 200, b
        result = b["result"][0]
        assert result["colnames"] == ["region", "total"], result
        assert [(r["region"], r["total"]) for r in result["data"]] == \
            [("north", 8), ("south", 4), ("east", 1)], result
        assert "GROUP BY" in result["query"].upper()    # (Superset's SQL, run by Spark)
        # the engine spec of the client (its entry point): Superset names the engine and
        # offers Spark's time grains; a month's grain and a time filter run on Spark
        s, b = superset.call("GET", "/api/v1/database/available/")
        assert s == 200 and any(e["engine"] == "jm" and e["name"] == "Spark SQL (jm cluster)"
                                for e in b["databases"]), b
        s, b = superset.call("POST", "/api/v1/dataset/", {
            "database": db, "schema": "default", "table_name": "orders",
            "sql": "SELECT * FROM VALUES (TIMESTAMP'2024-01-05 10:00:00', 3), "
                   "(TIMESTAMP'2024-01-20 11:00:00', 4), (TIMESTAMP'2024-02-03 00:00:00', 5) "
                   "AS orders(at, amount)"})
        assert s == 201, b
        axis = {"columnType": "BASE_AXIS", "expressionType": "SQL", "sqlExpression": "at",
                "label": "at", "timeGrain": "P1M"}
        s, b = superset.call("POST", "/api/v1/chart/data", {
            "datasource": {"id": b["id"], "type": "table"}, "force": True,
            "queries": [{"columns": [axis],
                         "metrics": [{"expressionType": "SQL", "label": "total",
                                      "sqlExpression": "SUM(amount)"}],
                         "filters": [{"col": "at", "op": "TEMPORAL_RANGE",
                                      "val": "2024-01-01 : 2024-02-01"}],
                         "orderby": [["at", True]], "row_limit": 10}],
            "result_format": "json", "result_type": "full"})
        assert s == 200, b
        result = b["result"][0]
        assert "date_trunc('MONTH'" in result["query"], result["query"]
        month = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc).timestamp() * 1000
        assert [(r["at"], r["total"]) for r in result["data"]] == [(month, 7)], result
    finally:
        superset.stop()
