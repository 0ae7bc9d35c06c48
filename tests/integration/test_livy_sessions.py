"""Livy's interactive sessions through real peers and a real Spark Connect server, driven
by a real Livy client from PyPI (`livy`, the one notebooks and scripts use): SQL and
Python sessions on any peer, their statements and outputs from any peer, cancel, bad
input. (Their failover, a SIGKILLed peer: tests/e2e/test_livy_failover.py.)"""
import asyncio
import os
import pwd
import sys

import pytest
import pytest_asyncio
import requests

from tests.conftest import running
from tests.helpers import ahttp, apoll, poll
from tests.integration.test_retention import age

# one 2-peer cluster with Spark servers for the tests that take it, on the module's loop
pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory):
    async with running(str(tmp_path_factory.mktemp("livy")), 2, {"spark.driver.memory": "512m",
                                           "jobmanager.executor.proxy-users": "nobody"},
                       spark=True) as c:
        yield c


async def test_a_livy_client_runs_sql_and_python_on_any_peer(cluster):
    from livy import LivySession, SessionKind
    from livy.models import StatementKind
    c = cluster

    def drive():
        with LivySession.create(c.url(1), kind=SessionKind.SQL, name="bi",
                                spark_conf={"spark.sql.shuffle.partitions": "3"},
                                echo=False) as sql:
            sql.run("CREATE OR REPLACE TEMPORARY VIEW t AS SELECT id, id * 2 AS twice "
                    "FROM range(5)")
            df = sql.download_sql("SELECT id, twice FROM t WHERE id >= 3 ORDER BY id")
            conf = sql.download_sql("SET spark.sql.shuffle.partitions")
        return df, conf

    def drive_bad():
        with LivySession.create(c.url(0), kind=SessionKind.SQL, echo=False,
                                check=False) as sql:
            return sql.run("SELECT * FROM no_such_table")  # (an error output)
    df, conf = await asyncio.to_thread(drive)
    assert list(df.columns) == ["id", "twice"] and df.values.tolist() == [[3, 6], [4, 8]]
    assert conf.values.tolist()[0][-1] == "3"
    bad = await asyncio.to_thread(drive_bad)
    assert bad.status.value == "error" and "no_such_table" in bad.evalue

    def drive_python():
        with LivySession.create(c.url(1), kind=SessionKind.PYSPARK, echo=False,
                                check=False) as py:
            out = py.run("x = 6\nprint('hello')\nx * 7")
            py.run("df = spark.range(4).selectExpr('id', 'id * id AS sq')\n"
                   "df.createOrReplaceTempView('squares')")
            frame = py.download("df")
            st = py.client.create_statement(py.session_id, "SELECT max(sq) AS m FROM squares",
                                            StatementKind.SQL)  # the same Spark session
            sql = poll(lambda: (lambda x: x if x.output else None)(
                py.client.get_statement(py.session_id, st.statement_id)), 60,
                what="the SQL statement's output")
            err = py.run("def f():\n    return 1 / 0\nf()")
            huge = py.run("%json {'n': 2 ** 70}")  # (msgpack stops at 64 bits)
            assert huge.ename == "OutputRefused" and "could not be" in huge.evalue, huge
            slow = py.client.create_statement(
                py.session_id, "import time\nfor _ in range(600): time.sleep(0.1)")
            poll(lambda: py.client.get_statement(py.session_id, slow.statement_id)
                 .state.value == "running", 60, what="the slow statement running")
            r = requests.post(f"{c.url(0)}/sessions/{py.session_id}/statements/"
                              f"{slow.statement_id}/cancel", timeout=30)  # through another peer
            assert r.status_code == 200 and r.json() == {"msg": "canceled"}, r.text
            cancelled = poll(lambda: (lambda x: x if x.state.value == "cancelled" else None)(
                py.client.get_statement(py.session_id, slow.statement_id)), 30,
                what="the slow statement cancelled")
            after = py.run("x")  # the session goes on, its variables too
            return out, frame, sql.output, err, cancelled, after, py.session_id
    out, frame, sql, err, cancelled, after, sid = await asyncio.to_thread(drive_python)
    assert cancelled.output is None or cancelled.output.ename == "KeyboardInterrupt"
    assert after.text == "6", after
    assert out.status.value == "ok" and out.text == "hello\n42", out
    assert frame.to_dict("list") == {"id": [0, 1, 2, 3], "sq": [0, 1, 4, 9]}
    assert sql.json["data"] == [[9]], sql
    assert err.ename == "ZeroDivisionError" and any("line 2" in t for t in err.traceback), err
    # the closed session's Python process log, on the peer that held it: the janitor
    # deletes it (aged past the janitor's grace for files just written)
    held = [p for p in (os.path.join(p.ground.log_dir, f"livy-session-{sid}.log") for p in c.peers)
            if os.path.exists(p)]
    assert len(held) == 1, held

    async def swept():
        for path in held:
            if os.path.exists(path):
                age(path, 60)
        for p in c.peers:
            await p.ground.janitor.sweep()
        return not os.path.exists(held[0])
    await apoll(swept, 30, what="the closed session's log deleted")


async def test_livy_sessions_answer_from_every_peer_and_refuse_bad_input(cluster):
    c = cluster
    s, b = await ahttp("POST", c.url(0) + "/sessions", {"kind": "sql", "name": "x",
                                                         "driverMemory": "2g"})
    assert s == 201 and b["kind"] == "sql" and b["state"] == "idle", b
    n = b["id"]
    s, b = await ahttp("POST", c.url(1) + f"/sessions/{n}/statements",
                       {"code": "SELECT 41 + 1 AS answer"})
    assert s == 201 and b["id"] == 0 and b["state"] in ("waiting", "running", "available")

    async def done():
        s, b = await ahttp("GET", c.url(0) + f"/sessions/{n}/statements/0")
        return b if b["state"] == "available" else None
    st = await apoll(done, 60, what="the statement's output")
    out = st["output"]["data"]["application/json"]
    assert out["data"] == [[42]] and out["schema"]["fields"][0]["name"] == "answer"
    s, b = await ahttp("GET", c.url(1) + f"/sessions/{n}/statements")
    assert s == 200 and b["total_statements"] == 1 and b["statements"][0]["output"] == \
        st["output"]
    s, b = await ahttp("GET", c.url(1) + f"/sessions/{n}/log")
    assert s == 200 and any("driverMemory" in line for line in b["log"]), b
    s, b = await ahttp("GET", c.url(0) + "/sessions")
    assert s == 200 and [x["id"] for x in b["sessions"]] == [n]
    # bad input: Livy's errors, as {"errors": [...]}
    s, b = await ahttp("POST", c.url(0) + "/sessions", {"kind": "spark"})
    assert s == 400 and "Scala" in b["errors"][0], b
    s, b = await ahttp("POST", c.url(0) + f"/sessions/{n}/statements",
                       {"code": "1", "kind": "sparkr"})
    assert s == 400 and "statement kind" in b["errors"][0], b
    s, b = await ahttp("POST", c.url(0) + f"/sessions/{n}/statements", {"kode": "x"})
    assert s == 400 and "code" in b["errors"][0]
    for path in ("/sessions/999", "/sessions/999/statements/0", f"/sessions/{n}/statements/7"):
        s, b = await ahttp("GET", c.url(1) + path)
        assert s == 404 and b["errors"], (path, b)
    # a Flink SQL Gateway client's POST /sessions still opens a Flink session
    s, b = await ahttp("POST", c.url(0) + "/sessions", {"properties": {}})
    assert s == 200 and "sessionHandle" in b
    # the marker of a recorded DataFrame view is refused in a user's statement (its
    # replay would run the Connect command it carries)
    s, b = await ahttp("POST", c.url(1) + f"/sessions/{b['sessionHandle']}/statements",
                       {"statement": "/* jm:connect-command AAAA */ CREATE OR REPLACE "
                                     "TEMPORARY VIEW `v` AS SELECT 1"})
    assert s == 400 and "reserved" in b["errors"][0], b
    s, b = await ahttp("DELETE", c.url(1) + f"/sessions/{n}")
    assert s == 200 and b == {"msg": "deleted"}
    s, b = await ahttp("GET", c.url(0) + f"/sessions/{n}")
    assert s == 404
    # proxyUser: the session's Python process runs as that user, where the policy lets it
    s, b = await ahttp("POST", c.url(0) + "/sessions", {"kind": "pyspark",
                                                         "proxyUser": "daemon"})
    assert s == 403 and "jobmanager.executor.proxy-users" in b["errors"][0], b
    if os.geteuid() == 0 and python_readable():
        await _runs_as_nobody(c)


async def test_a_livy_session_is_bounded_in_size_statements_waiting_time_and_output(tmp_path):
    """A session's conf and name are kept to 64 KB (413); at most max-waiting-statements
    wait or run (429 with Retry-After beyond); a statement past the statement timeout is
    interrupted (its output says so) and the session goes on; a statement that prints
    50 MB ends with its output cut, its process and peer unhurt."""
    settings = {"spark.driver.memory": "512m",
                "sql-gateway.livy-session.max-waiting-statements": 2,
                "sql-gateway.livy-session.statement-timeout": "4 s"}
    async with running(str(tmp_path), 1, settings, spark=True) as c:
        url = c.url(0)
        s, b = await ahttp("POST", url + "/sessions", {"kind": "pyspark",
                                                       "conf": {"k": "v" * 70_000}})
        assert s == 413 and "more than 65536" in b["errors"][0], b

        async def opened():  # (503 until the peer's engine is ready)
            s, b = await ahttp("POST", url + "/sessions", {"kind": "pyspark"})
            assert s in (201, 503), b
            return b if s == 201 else None
        n = (await apoll(opened, 120, what="a session opened"))["id"]

        async def post(code):
            return await ahttp("POST", url + f"/sessions/{n}/statements", {"code": code},
                               with_headers=True)

        async def ended(st):
            async def done():
                s, b = await ahttp("GET", url + f"/sessions/{n}/statements/{st}")
                return b if b["state"] in ("available", "cancelled", "error") else None
            return await apoll(done, 120, what=f"statement {st} ended")
        s, b, _ = await post("import time\nwhile True: time.sleep(0.1)")
        assert s == 201, b
        s, b, _ = await post("x = 6\nx * 7")
        assert s == 201, b
        s, b, h = await post("1")
        assert s == 429 and "max-waiting-statements" in b["errors"][0], b
        assert h["Retry-After"] == "5"
        first = await ended(0)
        assert first["output"]["ename"] == "StatementTimeout", first
        assert "interrupted" in first["output"]["evalue"]
        second = await ended(1)  # the next one ran: the session goes on
        assert second["output"]["data"]["text/plain"] == "42", second
        s, b, _ = await post("for _ in range(500):\n    print('z' * 100_000)\nx")
        assert s == 201, b
        big = await ended(2)
        text = big["output"]["data"]["text/plain"]
        assert big["output"]["status"] == "ok" and "[output cut" in text, big
        assert len(text) < 600_000
        s, b, _ = await post("x")
        last = await ended(3)
        assert last["output"]["data"]["text/plain"] == "6", last  # the same process


def python_readable() -> bool:
    from tests.integration.test_job_isolation import _reachable_by_others
    return all(_reachable_by_others(p) for p in (sys.executable, os.path.dirname(os.__file__),
                                                 os.path.dirname(pytest.__file__)))


async def _runs_as_nobody(c):
    s, b = await ahttp("POST", c.url(1) + "/sessions", {"kind": "pyspark",
                                                         "proxyUser": "nobody"})
    assert s == 201 and b["proxyUser"] == "nobody", b
    n = b["id"]
    s, b = await ahttp("POST", c.url(0) + f"/sessions/{n}/statements",
                       {"code": "import os\nos.getuid()"})
    assert s == 201, b

    async def done():
        s, b = await ahttp("GET", c.url(0) + f"/sessions/{n}/statements/0")
        return b if b["state"] == "available" else None
    st = await apoll(done, 90, what="the proxy user's statement")
    assert st["output"]["data"]["text/plain"] == str(pwd.getpwnam("nobody").pw_uid), st
    await ahttp("DELETE", c.url(1) + f"/sessions/{n}")
