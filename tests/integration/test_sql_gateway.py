"""The SQL gateway through real peers (in-process, real Raft and aiohttp) and a real Spark
Connect server: Flink SQL Gateway's REST flow on any peer for any session, session state
kept by the Spark session, paged results, errors, cancel, bad input."""
import asyncio
import os

import pytest
import pytest_asyncio

from jm.policy.jobs.vocab import TERMINAL

from tests.conftest import running
from tests.helpers import ahttp, apoll

# one cluster for the tests that share it (a Spark server per peer takes ~15 s to start),
# on one event loop for the whole module
pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]


SECRETS = {"JM_CONF_JOBMANAGER_WEIGHT": "1", "AWS_SECRET_ACCESS_KEY": "peer-only"}


def environ_names(pid: int) -> set:
    with open(f"/proc/{pid}/environ", "rb") as f:
        return {v.split(b"=", 1)[0].decode() for v in f.read().split(b"\0") if v}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def sqlc(tmp_path_factory):
    """3 peers with their Spark servers, shared by the tests that take it: each opens
    its own sessions and runs its own jobs."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in SECRETS.items():  # (the peer's own: its Spark server and SQL worker lack them)
            mp.setenv(k, v)
        async with running(str(tmp_path_factory.mktemp("sqlc")), 3, {
                "sql-gateway.page-rows": 4, "sql-gateway.fetch-wait": "200 ms",
                "sql-gateway.max-statement-size": "64 kb",
                "spark.driver.memory": "512m"}, spark=True) as c:
            yield c


async def open_session(c, peer=0, **body):
    s, b = await ahttp("POST", c.url(peer) + "/v1/sessions", body or {})
    assert s == 200, b
    return b["sessionHandle"]


async def run(c, sh, sql, peer=0, version="v1"):
    """Execute and read every page; (status, columns, rows, kinds) or the error body."""
    s, b = await ahttp("POST", f"{c.url(peer)}/{version}/sessions/{sh}/statements",
                       {"statement": sql})
    assert s == 200, b
    oh = b["operationHandle"]
    uri = f"/{version}/sessions/{sh}/operations/{oh}/result/0?rowFormat=JSON"
    rows, cols, kinds = [], None, set()
    while uri:
        s, b = await ahttp("GET", c.url(peer) + uri)
        if s != 200:
            return s, b
        kinds.add(b["resultType"])
        if b["resultType"] == "PAYLOAD":
            cols = b["results"]["columns"]
            rows += [d["fields"] for d in b["results"]["data"]]
        uri = b.get("nextResultUri")
    return 200, {"columns": cols, "rows": rows, "kinds": kinds, "oh": oh}


async def _status_is(url, want):
    s, b = await ahttp("GET", url)
    return s == 200 and b["status"] == want


async def _page(c, sh, oh, done=False):
    """Page 0 of an operation once it is not NOT_READY (its error body if it failed)."""
    s, b = await ahttp("GET", f"{c.url(0)}/v1/sessions/{sh}/operations/{oh}/result/0")
    if s != 200:
        if done:
            return b
        raise AssertionError(b)
    return b if b.get("resultType") != "NOT_READY" else None


async def test_flink_flow_on_any_peer_with_session_state_and_pages(sqlc):
    s, b = await ahttp("GET", sqlc.url(1) + "/v1/info")
    assert s == 200 and b["version"]
    s, b = await ahttp("GET", sqlc.url(2) + "/api_versions")
    assert b == {"versions": ["V1", "V2"]}
    sh = await open_session(sqlc, 0, properties={"spark.sql.shuffle.partitions": "2"},
                            sessionName="bi")
    s, info = await ahttp("GET", f"{sqlc.url(2)}/v1/sessions/{sh}")
    assert s == 200 and info["properties"] == {"spark.sql.shuffle.partitions": "2"}
    assert info["sessionName"] == "bi" and info["node"]
    # state defined through one peer is seen through another (the session is one place)
    s, r = await run(sqlc, sh, "CREATE OR REPLACE TEMP VIEW nums AS SELECT id FROM range(10)",
                     peer=1)
    assert s == 200, r
    s, r = await run(sqlc, sh, "SELECT id, id * 2 AS twice FROM nums ORDER BY id", peer=2,
                     version="v2")
    assert s == 200, r
    assert r["rows"] == [[i, 2 * i] for i in range(10)]  # pages of 4, 4, 2, then EOS
    assert [col["name"] for col in r["columns"]] == ["id", "twice"]
    assert r["columns"][0]["logicalType"]["type"] == "BIGINT"
    assert {"PAYLOAD", "EOS"} <= r["kinds"] <= {"PAYLOAD", "EOS", "NOT_READY"}
    s, r = await run(sqlc, sh, "SELECT id, CAST(id AS STRING) AS s FROM nums WHERE id < 0")
    assert s == 200 and r["rows"] == [], r  # no rows, still its columns
    assert [(c["name"], c["logicalType"]["type"]) for c in r["columns"]] == \
        [("id", "BIGINT"), ("s", "VARCHAR")]
    s, r = await run(sqlc, sh, "SET spark.sql.shuffle.partitions", peer=0)
    assert r["rows"] == [["spark.sql.shuffle.partitions", "2"]], r
    s, info = await ahttp("GET", f"{sqlc.url(0)}/v1/sessions/{sh}")
    assert info["state-statements"] == 1  # the temp view, for the session's next peer
    # status, heartbeat, close
    s, b = await ahttp("GET", f"{sqlc.url(1)}/v1/sessions/{sh}/operations/{r['oh']}/status")
    assert s == 200 and b == {"status": "FINISHED"}
    s, b = await ahttp("POST", f"{sqlc.url(2)}/v1/sessions/{sh}/heartbeat")
    assert s == 200
    s, b = await ahttp("DELETE", f"{sqlc.url(1)}/v1/sessions/{sh}/operations/{r['oh']}/close")
    assert s == 200 and b["status"] == "CLOSED"
    s, b = await ahttp("DELETE", f"{sqlc.url(1)}/v1/sessions/{sh}")
    assert s == 200
    s, b = await ahttp("GET", f"{sqlc.url(0)}/v1/sessions/{sh}")
    assert s == 404 and b["errors"]


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _spark_idle(cluster) -> bool:
    """Whether no peer's Connect JVM used more than a third of a core over a second."""
    servers = [p.ground.sparks.server for p in cluster.peers]
    pids = [s.proc.pid for s in servers if s and s.proc]
    before = [_cpu_seconds(pid) for pid in pids]
    await asyncio.sleep(1.0)
    return bool(pids) and all(_cpu_seconds(pid) - b < 0.35 for pid, b in zip(pids, before))


async def test_errors_bad_input_and_cancel(sqlc):
    sh = await open_session(sqlc, 1)
    s, b = await run(sqlc, sh, "SELECT * FROM no_such_table", peer=0)
    assert s == 400 and "no_such_table" in b["errors"][0].lower(), b
    s, b = await ahttp("POST", f"{sqlc.url(0)}/v1/sessions/{sh}/statements", {"statement": ""})
    assert s == 400 and b["errors"]
    s, b = await ahttp("POST", f"{sqlc.url(0)}/v1/sessions/{sh}/statements", [1])
    assert s == 400
    s, b = await ahttp("POST", f"{sqlc.url(0)}/v1/sessions/nope/statements",
                       {"statement": "SELECT 1"})
    assert s == 404
    s, b = await ahttp("POST", f"{sqlc.url(0)}/v1/sessions", {"properties": [1]})
    assert s == 400
    # sizes: a statement over sql-gateway.max-statement-size (read, then refused), a
    # body far over it (refused unread), properties over 64 KB: 413s naming the limit
    big = "SELECT 1 AS x -- " + "y" * 70_000
    s, b = await ahttp("POST", f"{sqlc.url(0)}/v1/sessions/{sh}/statements", {"statement": big})
    assert s == 413 and "sql-gateway.max-statement-size (65536 bytes)" in b["errors"][0], b
    s, b = await ahttp("POST", f"{sqlc.url(0)}/v1/sessions/{sh}/statements",
                       {"statement": big * 3})
    assert s == 413 and "sql-gateway.max-statement-size" in b["errors"][0], b
    s, b = await ahttp("POST", f"{sqlc.url(0)}/v1/sessions",
                       {"properties": {"spark.x": "y" * 70_000}})
    assert s == 413 and "more than 65536" in b["errors"][0], b
    # an out-of-order token, and a bad token
    s, b = await ahttp("POST", f"{sqlc.url(2)}/v1/sessions/{sh}/statements",
                       {"statement": "SELECT id FROM range(20)"})
    oh = b["operationHandle"]
    base = f"{sqlc.url(2)}/v1/sessions/{sh}/operations/{oh}/result"

    async def ready():
        s, b = await ahttp("GET", base + "/0")
        return b if b.get("resultType") == "PAYLOAD" else None
    first = await apoll(ready, 120, what="the first page")
    again = (await ahttp("GET", base + "/0"))[1]  # a retry of the same token
    assert again["results"]["data"] == first["results"]["data"]
    s, b = await ahttp("GET", base + "/3")
    assert s == 400 and "out of order" in b["errors"][0]
    s, b = await ahttp("GET", base + "/x")
    assert s == 400
    s, b = await ahttp("GET", base + "/1?rowFormat=CSV")
    assert s == 400
    # a long query cancelled
    s, b = await ahttp("POST", f"{sqlc.url(0)}/v1/sessions/{sh}/statements", {
        "statement": "SELECT count(*) FROM range(100000000000)"})
    oh = b["operationHandle"]
    s, b = await ahttp("POST", f"{sqlc.url(1)}/v1/sessions/{sh}/operations/{oh}/cancel")
    assert s == 200 and b["status"] == "CANCELED"
    s, b = await ahttp("GET", f"{sqlc.url(0)}/v1/sessions/{sh}/operations/{oh}/result/0")
    assert s == 409
    # ... and stopped in Spark: every peer's Connect JVM goes back to idle (a cancel that
    # reached the SQL worker before the statement reached Spark left it counting)
    await apoll(lambda: _spark_idle(sqlc), 30, interval=0.1,
                what="the Connect servers idle after the cancel")
    # a retried statement (same X-Request-Id) is the same operation and runs once: a
    # CREATE TEMP VIEW run twice would fail with "already exists"
    url = f"{sqlc.url(2)}/v1/sessions/{sh}/statements"
    view = {"statement": "CREATE TEMP VIEW once_v AS SELECT 1 AS x"}
    ops = [(await ahttp("POST", url, view, headers={"X-Request-Id": "r-1"}))[1]
           ["operationHandle"] for _ in range(2)]
    ops.append((await ahttp("POST", f"{sqlc.url(0)}/v1/sessions/{sh}/statements", view,
                            headers={"X-Request-Id": "r-1"}))[1]["operationHandle"])
    assert ops[0] == ops[1] == ops[2]
    b = await apoll(lambda: _page(sqlc, sh, ops[0]), 60, what="the view's statement")
    assert b["resultType"] in ("PAYLOAD", "EOS"), b
    s, b = await ahttp("POST", url, view, headers={"X-Request-Id": "r-2"})  # a new one
    assert s == 200 and b["operationHandle"] != ops[0]
    b = await apoll(lambda: _page(sqlc, sh, b["operationHandle"], done=True), 60,
                    what="the second CREATE")
    assert "already exists" in b["errors"][0].lower(), b
    s, b = await ahttp("POST", url, view, headers={"X-Request-Id": "x" * 129})
    assert s == 400
    # the session still works after that
    s, r = await run(sqlc, sh, "SELECT 41 + 1 AS answer", peer=2)
    assert r["rows"] == [[42]]
    # the server's defaults for short statements (local[*]: twice the cores)
    s, r = await run(sqlc, sh, "SET spark.sql.shuffle.partitions")
    assert r["rows"] == [["spark.sql.shuffle.partitions", str(2 * os.cpu_count())]], r


def _recorded(c, sh) -> dict:
    """The operations the session's record keeps (for its next holder), on peer 0."""
    with c.peers[0].parts.raft.read() as st:
        rec = st.sessions.get(sh)
        return dict(rec.ops) if rec is not None else {}


async def test_a_statements_answer_carries_its_first_page_when_asked(sqlc):
    """Prefer: return=representation (jm.client's sessions send it): a short read's whole
    result comes in the statement's answer, unrecorded; a longer one's first page, and
    the operation recorded before the answer; an error is the answer's."""
    sh = await open_session(sqlc, 0)

    async def post(sql, peer, rid, wait=30):  # (the first page within `wait` s)
        return await ahttp("POST", f"{sqlc.url(peer)}/v1/sessions/{sh}/statements",
                           {"statement": sql}, headers={
                               "Prefer": f"return=representation, wait={wait}",
                               "X-Request-Id": rid}, timeout=60, with_headers=True)
    s, b, h = await post("SELECT id, id * 3 AS x FROM range(3)", 1, "p-1")  # (forwarded)
    assert s == 200 and h["Preference-Applied"] == "return=representation", b
    page = b["result"]
    assert page["resultType"] == "EOS" and "nextResultUri" not in page, page
    assert [d["fields"] for d in page["results"]["data"]] == [[0, 0], [1, 3], [2, 6]]
    assert [col["name"] for col in page["results"]["columns"]] == ["id", "x"]
    assert b["operationHandle"] not in _recorded(sqlc, sh)  # nothing of it left to fetch
    # the same request again (its answer lost): answered again
    s, again, _ = await post("SELECT id, id * 3 AS x FROM range(3)", 2, "p-1")
    assert s == 200 and again["operationHandle"] == b["operationHandle"]
    assert again["result"]["results"]["data"] == page["results"]["data"]
    # more rows than a page (4): the first page, the rest by its URI, the read recorded
    s, b, _ = await post("SELECT id FROM range(10)", 0, "p-2")
    page = b["result"]
    assert s == 200 and page["resultType"] == "PAYLOAD", b
    assert [d["fields"] for d in page["results"]["data"]] == [[0], [1], [2], [3]]
    assert _recorded(sqlc, sh)[b["operationHandle"]]["kind"] == "read"
    rows, uri = [], page["nextResultUri"]
    while uri:
        s, p = await ahttp("GET", sqlc.url(2) + uri)
        assert s == 200, p
        rows += [d["fields"] for d in p["results"]["data"]]
        uri = p.get("nextResultUri")
    assert rows == [[i] for i in range(4, 10)]
    # a write is recorded as before; a failing statement's error is the answer
    s, b, _ = await post("CREATE OR REPLACE TEMP VIEW pv AS SELECT 1 AS one", 0, "p-3")
    assert s == 200 and b["result"]["resultType"] == "EOS", b
    assert b["operationHandle"] in _recorded(sqlc, sh)
    s, b, _ = await post("SELECT * FROM no_such_table_p", 1, "p-4")
    assert s == 400 and "no_such_table_p" in b["errors"][0].lower(), b
    # a statement still running after its wait: NOT_READY, recorded
    s, b, _ = await post("SELECT count(*) FROM range(100000000000)", 0, "p-5", wait=0)
    assert s == 200 and b["result"]["resultType"] == "NOT_READY", b
    assert b["result"]["nextResultUri"].endswith("/result/0?rowFormat=JSON")
    assert b["operationHandle"] in _recorded(sqlc, sh)
    s, c = await ahttp("POST", f"{sqlc.url(1)}/v1/sessions/{sh}/operations/"
                               f"{b['operationHandle']}/cancel")
    assert s == 200 and c["status"] == "CANCELED", c
    # a recorded read sent again to a holder that does not know it (its answer lost, the
    # session moved): adopted from the record and run again, nothing to record again
    s, b, _ = await post("SELECT count(*) FROM range(100000000000)", 0, "p-7", wait=0)
    oh = b["operationHandle"]
    s, c = await ahttp("POST", f"{sqlc.url(0)}/v1/sessions/{sh}/operations/{oh}/cancel")
    assert s == 200 and c["status"] == "CANCELED", c
    node = (await ahttp("GET", f"{sqlc.url(0)}/v1/sessions/{sh}"))[1]["node"]
    holder = next(p for p in sqlc.peers if p.node == node)
    holder.parts.sql.statements.host.local[sh].ops.pop(oh)  # (as a new holder knows it)
    s, b, _ = await post("SELECT count(*) FROM range(100000000000)", 1, "p-7", wait=0)
    assert s == 200 and b["operationHandle"] == oh, b
    assert b["result"]["resultType"] == "NOT_READY", b
    s, c = await ahttp("POST", f"{sqlc.url(1)}/v1/sessions/{sh}/operations/{oh}/cancel")
    assert s == 200 and c["status"] == "CANCELED", c
    for bad in ("soon", "61", "-1"):
        s, b, _ = await post("SELECT 1", 0, f"p-bad-{bad}", wait=bad)
        assert s == 400 and "Prefer: wait" in b["errors"][0], b


async def test_dbapi_and_jm_sql(sqlc, tmp_path):
    import asyncio
    import os
    import subprocess
    import sys

    from jm.client import dbapi
    from tests.helpers import ROOT

    def with_dbapi():
        with dbapi.connect([sqlc.url(2), sqlc.url(0)]) as conn:
            cur = conn.cursor()
            cur.execute("CREATE OR REPLACE TEMP VIEW t AS SELECT id, CAST(id AS STRING) AS s "
                        "FROM range(%(n)s)", {"n": 9})
            cur.execute("SELECT id, s FROM t WHERE s <> %s ORDER BY id", ("3",))
            desc = [(d[0], d[1]) for d in cur.description]
            one = cur.fetchone()
            many = cur.fetchmany(3)
            rest = cur.fetchall()
            other = conn.cursor()  # same session: the temp view is there
            other.execute("SELECT count(*) FROM t")
            count = other.fetchall()
            try:
                other.execute("SELECT nope FROM t")
                error = None
            except dbapi.ProgrammingError as exc:
                error = str(exc)
            return desc, one, many, rest, count, error
    desc, one, many, rest, count, error = await asyncio.to_thread(with_dbapi)
    assert desc == [("id", "BIGINT"), ("s", "VARCHAR")]
    assert desc[0][1] == dbapi.NUMBER and desc[1][1] == dbapi.STRING
    assert one == (0, "0") and many == [(1, "1"), (2, "2"), (4, "4")]
    assert rest == [(i, str(i)) for i in (5, 6, 7, 8)]
    assert count == [(9,)]
    assert error and "nope" in error

    script = tmp_path / "q.sql"
    script.write_text("-- a script\nCREATE TEMP VIEW v AS SELECT 'a;b' AS x;\n"
                      "SELECT x, 1 AS n FROM v;\n")
    env = dict(os.environ, JM_ADDRESS=f"{sqlc.url(1)},{sqlc.url(0)}")

    def jm(*args):
        return subprocess.run([sys.executable, "-m", "jm.client.cli", "sql", *args], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=120)
    r = await asyncio.to_thread(jm, "-f", str(script), "--format", "csv")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["x,n", "a;b,1"], r.stdout
    r = await asyncio.to_thread(jm, "-e", "SELECT 1 AS one; SELECT 'x' AS two", "--timing")
    assert r.returncode == 0, r.stderr
    assert "| one |" in r.stdout and "| x   |" in r.stdout and " ms)" in r.stdout, r.stdout
    r = await asyncio.to_thread(jm, "-e", "SELECT nope", "--format", "json")
    assert r.returncode == 1 and r.stderr.startswith("ERROR: ") and "Traceback" not in r.stderr
    r = await asyncio.to_thread(jm, "-e", "SELECT 1", "--property", "novalue")
    assert r.returncode == 2 and "KEY=VALUE" in r.stderr


async def test_a_session_survives_its_peers_death(tmp_path):
    """The session's peer stops (its heartbeats with it): the session moves, its state is
    replayed on the new peer, a read it was running is run again there and answered from
    the page the client had reached, and a write that had ended is answered from the
    session's record (its error, not run again)."""
    async with running(str(tmp_path), 3, {"sql-gateway.page-rows": 3,
                                          "sql-gateway.fetch-wait": "200 ms",
                                          "spark.driver.memory": "512m"}, spark=True) as c:
        victim = c.peers[1]  # peer 0 runs the shared Spark server of this in-process cluster
        sh = await open_session(c, 1)  # placed on the receiving peer while all hold none
        s, info = await ahttp("GET", f"{c.url(0)}/v1/sessions/{sh}")
        assert info["node"] == victim.node
        s, r = await run(c, sh, "CREATE TEMP VIEW t AS SELECT id FROM range(10)", peer=1)
        assert s == 200, r
        s, b = await ahttp("POST", f"{c.url(2)}/v1/sessions/{sh}/statements",
                           {"statement": "SELECT id FROM t ORDER BY id"})
        read = b["operationHandle"]
        base = f"{c.url(2)}/v1/sessions/{sh}/operations/{read}/result"

        async def page(token):
            s, b = await ahttp("GET", f"{base}/{token}")
            return b if s == 200 and b["resultType"] != "NOT_READY" else None
        first = await apoll(lambda: page(0), 120, what="the read's first page")
        assert [d["fields"] for d in first["results"]["data"]] == [[0], [1], [2]]
        s, b = await ahttp("POST", f"{c.url(2)}/v1/sessions/{sh}/statements",
                           {"statement": "INSERT INTO no_such_table VALUES (1)"})
        write = b["operationHandle"]
        wstatus = f"{c.url(2)}/v1/sessions/{sh}/operations/{write}/status"
        await apoll(lambda: _status_is(wstatus, "ERROR"), 60, what="the write failed")
        s, before = await ahttp("GET", f"{c.url(2)}/v1/sessions/{sh}/operations/{write}/result/0")

        c.peers.remove(victim)
        await victim.stop()  # no more heartbeats: declared dead, its sessions move

        rows, token = [], 1
        while True:
            b = await apoll(lambda t=token: page(t), 60, interval=0.2,
                            what=f"page {token} after the failover")
            if b["resultType"] == "EOS":
                break
            rows += [d["fields"] for d in b["results"]["data"]]
            token += 1
        assert rows == [[i] for i in range(3, 10)]  # from where the client was
        s, b = await ahttp("GET", f"{c.url(0)}/v1/sessions/{sh}/operations/{write}/result/0")
        # from the record (its first 4 KB), not "may or may not have taken effect"
        assert s == 400 and before["errors"][0].startswith(b["errors"][0]), (b, before)
        assert "no_such_table" in b["errors"][0].lower(), b
        s, info = await ahttp("GET", f"{c.url(2)}/v1/sessions/{sh}")
        assert info["node"] != victim.node and info["moves"] == 1
        s, r = await run(c, sh, "SELECT count(*) AS n FROM t", peer=0)  # state replayed
        assert s == 200 and r["rows"] == [[10]], r


async def test_sql_jobs_run_in_the_sql_worker(sqlc):
    """POST /jobs with `sql` keeps its contract (a job, its result, its exceptions, cancel)
    but runs as a statement in the peer's SQL worker, not in a job process."""
    async def submit(spec, peer=0):
        s, b = await ahttp("POST", sqlc.url(peer) + "/jobs",
                           dict(spec, **{"restart-strategy": {"type": "none"}}))
        assert s == 202, b
        return b["jobid"]

    async def ended(jid):
        async def check():
            s, b = await ahttp("GET", sqlc.url(1) + f"/jobs/{jid}")
            return b if b["state"] in TERMINAL else None
        return await apoll(check, 120, interval=0.1, what=f"job {jid} ended")
    ok = await submit({"sql": "SELECT id, id * id AS sq FROM range(5) ORDER BY id"}, peer=2)
    big = await submit({"sql": "SELECT id FROM range(5000)"})
    bad = await submit({"sql": "SELECT nope FROM range(1)"}, peer=1)
    done = await ended(ok)
    assert done["state"] == "FINISHED"
    assert done["result"] == {"columns": ["id", "sq"], "rows": [[i, i * i] for i in range(5)],
                              "truncated": False}
    s, logs = await ahttp("GET", sqlc.url(0) + f"/jobs/{ok}/logs")
    assert "in the peer's SQL worker" in logs["text"], logs
    big_done = await ended(big)
    assert big_done["result"]["truncated"] is True and len(big_done["result"]["rows"]) == 1000
    failed = await ended(bad)
    assert failed["state"] == "FAILED"
    s, ex = await ahttp("GET", sqlc.url(0) + f"/jobs/{bad}/exceptions")
    assert "nope" in ex["root-exception"].lower(), ex
    workers = [w.proc.pid for p in sqlc.peers for w in p.parts.sql.host.workers.values() if w.proc]
    assert workers
    for pid in [sqlc.peers[0].ground.sparks.server.proc.pid] + workers:
        names = environ_names(pid)
        assert "PATH" in names and not names & set(SECRETS), (pid, names & set(SECRETS))
    for pid in workers:  # users' SQL runs there: confined as a job process is
        with open(f"/proc/{pid}/oom_score_adj") as f:
            assert int(f.read()) == 500, pid  # jobmanager.executor.limits.oom-score-adj
    slow = await submit({"sql": "SELECT count(*) FROM range(100000000000)"})

    async def running():
        s, b = await ahttp("GET", sqlc.url(0) + f"/jobs/{slow}")
        return b["state"] == "RUNNING"
    await apoll(running, 60, what="the slow SQL job running")
    s, b = await ahttp("PATCH", sqlc.url(2) + f"/jobs/{slow}?mode=cancel")
    assert s == 202
    assert (await ended(slow))["state"] == "CANCELED"


async def test_read_only_sql_jobs_share_a_warm_session_and_others_leave_nothing(sqlc):
    """A SQL job that only reads runs in the peer's warm session for its spark-conf; a job
    whose statement defines session state gets a fresh session, and leaves nothing for the
    next job; a cancelled read leaves the warm session usable."""
    import re

    async def job(spec, peer=0):
        s, b = await ahttp("POST", sqlc.url(peer) + "/jobs",
                           dict(spec, **{"restart-strategy": {"type": "none"}}))
        assert s == 202, b
        jid = b["jobid"]

        async def check():
            s, b = await ahttp("GET", sqlc.url(1) + f"/jobs/{jid}")
            return b if b["state"] in TERMINAL else None
        done = await apoll(check, 120, interval=0.1, what=f"job {jid} ended")
        s, logs = await ahttp("GET", sqlc.url(0) + f"/jobs/{jid}/logs")
        m = re.search(r"\(session ([0-9a-f-]+)(, shared by read-only jobs)?\)", logs["text"])
        assert m, logs
        return done, m.group(1), bool(m.group(2))

    reads = [await job({"sql": "SELECT sum(id) AS s FROM range(10)"}, peer=i % 3)
             for i in range(4)]
    by_node: dict = {}
    for done, session, shared in reads:
        assert done["state"] == "FINISHED" and done["result"]["rows"] == [[45]], done
        assert shared
        by_node.setdefault(done["node"], set()).add(session)
    # 4 jobs on 3 peers: some peer ran two, in its one warm session
    assert all(len(sessions) == 1 for sessions in by_node.values()), by_node

    done, view_session, shared = await job({"sql": "CREATE TEMPORARY VIEW leak AS SELECT 1"})
    assert done["state"] == "FINISHED" and not shared
    done, conf_session, shared = await job({"sql": "SET spark.sql.shuffle.partitions=7"})
    assert done["state"] == "FINISHED" and not shared
    assert {view_session, conf_session}.isdisjoint(set().union(*by_node.values()))
    for peer in range(3):  # nothing of theirs is seen by the next jobs, wherever they run
        done, _, _ = await job({"sql": "SELECT * FROM leak"}, peer=peer)
        assert done["state"] == "FAILED", done
        done, _, shared = await job({"sql": "SET spark.sql.shuffle.partitions"}, peer=peer)
        assert shared and done["result"]["rows"][0][1] != "7", done

    done, own, shared = await job({"sql": "SET spark.sql.shuffle.partitions",
                                   "spark-conf": {"spark.sql.shuffle.partitions": "3"}})
    assert shared and done["result"]["rows"] == [["spark.sql.shuffle.partitions", "3"]], done
    assert own not in set().union(*by_node.values())  # its own warm session, for its conf

    s, b = await ahttp("POST", sqlc.url(0) + "/jobs",
                       {"sql": "SELECT count(*) FROM range(100000000000)",
                        "restart-strategy": {"type": "none"}})
    slow = b["jobid"]

    async def running():
        s, b = await ahttp("GET", sqlc.url(0) + f"/jobs/{slow}")
        return b if b["state"] == "RUNNING" else None
    node = (await apoll(running, 60, what="the slow SQL job running"))["node"]
    s, b = await ahttp("PATCH", sqlc.url(2) + f"/jobs/{slow}?mode=cancel")
    assert s == 202

    async def canceled():
        s, b = await ahttp("GET", sqlc.url(0) + f"/jobs/{slow}")
        return b["state"] == "CANCELED"
    await apoll(canceled, 60, what="the slow SQL job cancelled")
    # the warm session the cancelled read ran in still answers: 6 reads at once, spread
    # over the 3 peers (2 each while they run)
    after = await asyncio.gather(*(job({"sql": "SELECT 41 + 1 AS x"}, peer=i % 3)
                                   for i in range(6)))
    assert all(d["state"] == "FINISHED" and d["result"]["rows"] == [[42]] for d, _, _ in after)
    assert node in {d["node"] for d, _, _ in after}


async def test_a_peer_that_has_not_applied_a_new_session_yet_catches_up(sqlc, monkeypatch):
    """A session opened through one peer is used at once through another that has not
    applied it yet (no X-JM-Min-Index, as a Flink client behind a load balancer sends):
    that peer looks again after a Raft barrier instead of answering 404."""
    from jm.cluster.sql.sessionhost import SessionHost
    from jm.cluster.sql.sqlsessions import SqlSessions
    from jm.api import UnknownSession
    sh = await open_session(sqlc, 0)
    lagging = sqlc.peers[1].parts.sql
    real_record, real_catch_up = SessionHost.record, SqlSessions.catch_up
    barriers = []

    def record(self, handle):  # peer 1 "has not applied it" until it caught up once
        if self is lagging.host and not barriers:
            raise UnknownSession(404, f"session {handle} does not exist")
        return real_record(self, handle)

    async def catch_up(self):
        await real_catch_up(self)
        if self is lagging.sessions:
            barriers.append(1)
    monkeypatch.setattr(SessionHost, "record", record)
    monkeypatch.setattr(SqlSessions, "catch_up", catch_up)
    import aiohttp
    async with aiohttp.ClientSession() as http:  # without the test's read-your-writes
        async with http.get(f"{sqlc.url(1)}/v1/sessions/{sh}") as r:
            assert r.status == 200, await r.text()
        assert barriers == [1]
        async with http.get(f"{sqlc.url(1)}/v1/sessions/{'0' * 8}-0000-0000-0000-{'0' * 12}") as r:
            body = await r.json()
            assert r.status == 404 and "does not exist" in body["errors"][0], body
    s, r = await run(sqlc, sh, "SELECT 1 AS one", peer=1)
    assert s == 200 and r["rows"] == [[1]], r


async def test_a_full_peer_places_sessions_elsewhere_and_then_503(tmp_path):
    """sql-gateway.max-sessions per peer: a new session goes to a peer with room; when
    every peer is full the answer is 503 with Retry-After, and a closed session makes room."""
    import aiohttp
    async with running(str(tmp_path), 2, {"sql-gateway.max-sessions": 1,
                                          "spark.driver.memory": "512m"}, spark=True) as c:
        first = await open_session(c, 0)
        second = await open_session(c, 0)  # peer 0's... or the other one, but not both on one
        nodes = [(await ahttp("GET", f"{c.url(1)}/v1/sessions/{h}"))[1]["node"]
                 for h in (first, second)]
        assert len(set(nodes)) == 2, nodes
        async with aiohttp.ClientSession() as s:
            async with s.post(c.url(1) + "/v1/sessions", json={}) as r:
                body = await r.json()
                assert r.status == 503 and r.headers.get("Retry-After"), body
                assert "max-sessions" in body["errors"][0]
        s, _ = await ahttp("DELETE", f"{c.url(0)}/v1/sessions/{first}")
        assert s == 200
        third = await open_session(c, 1)
        s, info = await ahttp("GET", f"{c.url(0)}/v1/sessions/{third}")
        assert info["node"] == nodes[0]  # the room the closed one left
        s, r = await run(c, third, "SELECT 1 AS one")
        assert s == 200 and r["rows"] == [[1]]


async def test_the_connect_server_refuses_clients_without_the_peers_token(sqlc):
    """Any local user could otherwise run SQL and Python UDFs as the peer's user: the
    embedded Connect server takes only the token the peer gives its own jobs."""
    import subprocess
    import sys
    server = sqlc.peers[0].ground.sparks.server
    probe = ("import sys; from pyspark.sql import SparkSession; "
             "s = SparkSession.builder.remote(sys.argv[1]).create(); "
             "print(s.sql('SELECT 7 AS x').collect()[0].x)")
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_AUTHENTICATE_TOKEN"}

    def run(url: str, **extra) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", probe, url], env=dict(env, **extra),
                              capture_output=True, text=True, timeout=120)
    for url, extra in ((f"sc://127.0.0.1:{server.port}", {}), (server.url, {}),
                       (server.url, {"SPARK_CONNECT_AUTHENTICATE_TOKEN": "guess"})):
        r = await asyncio.to_thread(run, url, **extra)
        assert r.returncode != 0 and "7" not in r.stdout.split(), (url, r.stdout, r.stderr[-2000:])
    r = await asyncio.to_thread(run, server.url, SPARK_CONNECT_AUTHENTICATE_TOKEN=server.token)
    assert r.returncode == 0 and r.stdout.split()[-1] == "7", r.stderr[-2000:]
