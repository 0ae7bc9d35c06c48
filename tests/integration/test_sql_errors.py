"""Issue 32: a SQL typo is one line for the user (Spark's error class and message), through
every client of the SQL gateway: `jm sql -e`, its interactive shell, the DB-API module and
Flink's REST answer; the whole text Spark gave stays second in that answer's `errors` and
in the peer's log. A real peer (in-process) with its real Spark Connect server."""
import asyncio
import logging
import os
import subprocess
import sys

import pytest

from tests.conftest import running
from tests.helpers import ROOT, ahttp, apoll

pytestmark = pytest.mark.slow  # a Spark Connect server's JVM

TYPO = "SELEC 1"
LINE = "[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'. SQLSTATE: 42601"


@pytest.fixture
async def peer(tmp_path):
    async with running(str(tmp_path), 1, {"spark.driver.memory": "512m"}, spark=True) as c:
        yield c


def jm_sql(url: str, home, *args: str, stdin: str | None = None
           ) -> subprocess.CompletedProcess:
    env = dict(os.environ, JM_ADDRESS=url, HOME=str(home))  # (the shell's history file)
    return subprocess.run([sys.executable, "-m", "jm.client.cli", "sql", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120, input=stdin)


async def test_a_sql_typo_is_one_line_everywhere_and_the_whole_text_is_kept(peer, caplog,
                                                                            tmp_path):
    caplog.set_level(logging.INFO, logger="jm.sql")
    url = peer.url(0)
    r = await asyncio.to_thread(jm_sql, url, tmp_path, "-e", TYPO)
    assert r.returncode == 1, r
    assert r.stderr.startswith(f"ERROR: {LINE}") and r.stderr.count("\n") == 1, r.stderr
    for noise in ("JVM stacktrace", "== SQL ==", "^^^", "\tat ", "Traceback"):
        assert noise not in r.stderr, r.stderr

    r = await asyncio.to_thread(jm_sql, url, tmp_path, stdin=f"{TYPO};\nSELECT 2 AS two;\n")
    assert r.returncode == 0, r  # the shell goes on after an error
    assert f"ERROR: {LINE}" in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert "| two |" in r.stdout, r.stdout

    def with_dbapi():
        from jm.client import dbapi
        with dbapi.connect(url) as conn:
            try:
                conn.cursor().execute(TYPO)
            except dbapi.ProgrammingError as exc:
                return exc
    exc = await asyncio.to_thread(with_dbapi)
    assert str(exc).startswith(LINE) and "\n" not in str(exc), str(exc)
    assert "== SQL ==" in exc.__cause__.detail  # the whole text, for whoever wants it

    s, b = await ahttp("POST", url + "/v1/sessions", {})
    sh = b["sessionHandle"]
    s, b = await ahttp("POST", f"{url}/v1/sessions/{sh}/statements", {"statement": TYPO})
    oh = b["operationHandle"]
    async def answered():  # (each GET waits for the statement up to its fetch-wait)
        s, b = await ahttp("GET", f"{url}/v1/sessions/{sh}/operations/{oh}/result/0")
        return None if s == 200 and b["resultType"] == "NOT_READY" else (s, b)
    s, b = await apoll(answered, 60, what="the statement's answer")
    assert s == 400, b
    short, whole = b["errors"]  # Flink's shape: the line, then the server-side text
    assert short.startswith(LINE) and "\n" not in short, short
    assert LINE in whole and "== SQL ==" in whole and "SELEC 1" in whole, whole
    logged = [r.getMessage() for r in caplog.records if r.name == "jm.sql"
              and f"SQL operation {oh} of session {sh} failed" in r.getMessage()]
    assert len(logged) == 1 and "== SQL ==" in logged[0], logged
    await _a_sql_job_s_typo(peer)  # (the same Connect server: one JVM start for both)


async def _a_sql_job_s_typo(c):
    """A SQL job's typo (`jm submit --sql ... --wait`) fails in one line, at once, the
    whole text in its exceptions."""
    from tests.integration.test_cli import jm
    rc, out, err = await jm("-a", c.url(0), "submit", "--sql", "SELEC 1", "--wait",
                            timeout=300)
    assert rc == 1, (out, err)
    jid, state, line = out.strip().splitlines()  # three lines: no stack
    assert state == "FAILED"
    assert "PARSE_SYNTAX_ERROR" in line and "JVM" not in line, line
    assert len(err.strip().splitlines()) == 1 and "PARSE_SYNTAX_ERROR" in err, err
    s, ex = await ahttp("GET", c.url(0) + f"/jobs/{jid}/exceptions")
    [failure] = [e for e in ex["all-exceptions"] if e["failure"]]  # not restarted
    assert failure["exception"] == line
    assert "== SQL ==" in failure["stacktrace"] or "JVM stacktrace" in \
        failure["stacktrace"], failure
