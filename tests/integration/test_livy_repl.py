"""The process of a Livy `pyspark` session (jm/runtime/livyrepl.py) through its peer-side
client (jm/runtime/livyclient.py), against a real Spark Connect server: Python's
interactive semantics, errors and tracebacks, magics, the session's state recorded and
replayed by the SQL worker into another Spark session, interrupts, the end of its input."""
import asyncio
import os
import subprocess
import sys
import time
import uuid

import pytest

from jm.policy.sql import connectplan
from jm.runtime import sqlproto as SP
from jm.runtime.livyclient import LivyProcess
from jm.policy.jobs.runparams import TOKEN_ENV
from jm.runtime.ports import free_port
from jm.runtime.sparkjvm import port_open
from jm.runtime.sparkserver import SparkConnectServer
from jm.runtime.sqlclient import SqlWorker

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark_server(tmp_path_factory):
    """A real Spark Connect server (local[2]); (its URL, the env its clients need)."""
    base = str(tmp_path_factory.mktemp("spark"))
    server = SparkConnectServer(free_port(), "local[2]", os.path.join(base, "log"),
                                os.path.join(base, "ready"), "512m",
                                {"spark.sql.shuffle.partitions": "2"}, "WARN", 120,
                                warmup=None, scratch_dir=os.path.join(base, "scratch"))
    os.makedirs(server.log_dir, exist_ok=True)
    with open(os.path.join(server.log_dir, "spark-connect.log"), "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "jm.runtime.pdeathsig",
                                 *server._command()], stdout=out, stderr=out,
                                env=server._env())
    try:
        deadline = time.monotonic() + 120
        while not port_open("127.0.0.1", server.port):
            assert proc.poll() is None, "the Spark Connect server exited"
            assert time.monotonic() < deadline, "the Spark Connect server did not start"
            time.sleep(0.2)
        yield server.url, {TOKEN_ENV: server.token}
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture
async def repl(spark_server, tmp_path):
    url, env = spark_server
    p = LivyProcess(url, str(uuid.uuid4()), str(tmp_path / "livy.log"), env_add=env)
    try:
        yield p
    finally:
        await p.close()
        p.kill()


async def test_output_and_last_expression(repl):
    r = await repl.run(1, "print('hello')\nx = 20 + 1\nx * 2")
    assert (r.status, r.text) == ("ok", "hello\n42")
    r = await repl.run(2, "x\nNone")
    assert (r.status, r.text) == ("ok", "")
    r = await repl.run(3, "x + 1")   # the namespace is kept
    assert (r.status, r.text, r.state) == ("ok", "22", ())
    r = await repl.run(4, "spark.range(5).count()")
    assert (r.status, r.text) == ("ok", "5"), r
    r = await repl.run(5, "import sys\nprint('to stderr', file=sys.stderr)\nsqlContext is spark")
    assert (r.status, r.text) == ("ok", "to stderr\nTrue")


async def test_errors(repl):
    r = await repl.run(1, "print('before')\n\ndef f():\n    return 1 / 0\n\nf()")
    assert (r.status, r.ename, r.evalue, r.text) == (
        "error", "ZeroDivisionError", "division by zero", "before")
    text = "".join(r.traceback)
    assert 'File "<stdin>", line 6, in <module>' in text
    assert 'File "<stdin>", line 4, in f' in text
    assert "livyexec" not in text and "livyrepl" not in text
    r = await repl.run(2, "x = (")
    assert (r.status, r.ename) == ("error", "SyntaxError")
    assert '"<stdin>", line 1' in "".join(r.traceback)
    r = await repl.run(3, "sc.parallelize([1])")
    assert (r.status, r.ename) == ("error", "RuntimeError")
    assert "SparkContext is not available" in r.evalue
    r = await repl.run(4, "%nope 1")
    assert (r.status, r.ename) == ("error", "UnknownMagic")
    r = await repl.run(5, "spark.sql('SELECT * FROM no_such_table').collect()")
    assert r.status == "error" and "no_such_table" in r.evalue.lower()
    r = await repl.run(6, "1 + 1")   # the process goes on
    assert (r.status, r.text) == ("ok", "2")


async def test_magics(repl):
    r = await repl.run(1, "d = {'a': [1, 2], 'b': None}\n%json d")
    assert (r.status, r.json, r.text) == ("ok", {"a": [1, 2], "b": None}, "")
    r = await repl.run(2, "%json object()")
    assert (r.status, r.ename) == ("error", "TypeError")
    r = await repl.run(3, "%table [{'x': 1, 'y': 'a'}, {'x': 2, 'y': None}]")
    assert r.status == "ok" and r.table == {
        "headers": [{"name": "x", "type": "INT_TYPE"}, {"name": "y", "type": "STRING_TYPE"}],
        "data": [[1, "a"], [2, None]]}
    r = await repl.run(4, "df = spark.range(3).selectExpr('id', 'cast(id AS string) AS s')\n"
                          "%table df")
    assert r.status == "ok", r
    assert r.table == {"headers": [{"name": "id", "type": "BIGINT_TYPE"},
                                   {"name": "s", "type": "STRING_TYPE"}],
                       "data": [[0, "0"], [1, "1"], [2, "2"]]}
    r = await repl.run(5, "%table spark.range(5000)")
    assert r.status == "ok" and len(r.table["data"]) == 1000


async def test_state_recorded_and_replayed(repl, spark_server, tmp_path):
    code = ("spark.sql('SET spark.sql.shuffle.partitions=7')\n"
            "spark.conf.set('jm.test.key', 'v 1')\n"
            "spark.conf.set('jm.test.gone', 'x')\n"
            "spark.conf.unset('jm.test.gone')\n"
            "spark.range(4).selectExpr('id * 10 AS n').createOrReplaceTempView('tens')\n"
            "spark.range(2).createOrReplaceGlobalTempView('glob')\n"
            "spark.sql('SELECT 1').collect()\n"
            "spark.sql('CREATE TEMPORARY VIEW two AS SELECT n FROM tens WHERE n < 20')\n"
            "spark.table('two').count()")
    r = await repl.run(1, code)
    assert (r.status, r.text) == ("ok", "2"), r
    assert r.state[:4] == ("SET spark.sql.shuffle.partitions=7", "SET `jm.test.key`=`v 1`",
                           "SET jm.test.gone=x", "RESET jm.test.gone"), r.state
    assert len(r.state) == 6, r.state
    assert connectplan.decode(r.state[4]) is not None
    assert connectplan.view_name(r.state[4]) == "tens"
    assert r.state[5] == "CREATE TEMPORARY VIEW two AS SELECT n FROM tens WHERE n < 20"
    r2 = await repl.run(2, "spark.sql('SET jm.test.bad')\nspark.sql('CREATE TEMPORARY VIEW "
                           "bad AS SELECT * FROM no_such_table')")
    assert r2.status == "error" and r2.state == (), r2   # (not recorded: it failed)

    url, env = spark_server
    worker = SqlWorker(url, 2, str(tmp_path / "sql.log"), env_add=env)
    try:
        other = str(uuid.uuid4())
        opened = await worker.call(SP.OpenSession(other, {}, r.state), timeout=60)
        assert opened == {"replayed": 6, "errors": []}, opened
        rows = await worker.call(SP.Execute(other, "op1", "SELECT sum(n) AS s FROM two"), 60)
        assert rows["rows"] == [[10]], rows
        rows = await worker.call(SP.Execute(other, "op2", "SELECT n FROM tens ORDER BY n"), 60)
        assert rows["rows"] == [[0], [10], [20], [30]], rows
        for op, key, value in (("op3", "spark.sql.shuffle.partitions", "7"),
                               ("op4", "jm.test.key", "v 1")):
            rows = await worker.call(SP.Execute(other, op, f"SET {key}"), 60)
            assert rows["rows"] == [[key, value]], rows
        rows = await worker.call(SP.Execute(other, "op5", "SET jm.test.gone"), 60)
        assert rows["rows"][0][1] == "<undefined>", rows
        # a marked statement that carries anything but a temporary view is refused
        from pyspark.sql.connect.proto import Command
        cmd = Command()
        cmd.create_dataframe_view.CopyFrom(
            Command.FromString(connectplan.decode(r.state[4])).create_dataframe_view)
        cmd.create_dataframe_view.is_global = True
        bad = connectplan.encode_view("g", cmd.SerializeToString())
        opened = await worker.call(SP.OpenSession(str(uuid.uuid4()), {}, (bad,)), timeout=60)
        assert opened["replayed"] == 1 and len(opened["errors"]) == 1, opened
        assert "not a temporary view" in opened["errors"][0]
    finally:
        await worker.close()
        worker.kill()


async def test_big_view_is_noted_not_recorded(repl):
    r = await repl.run(1, "rows = [('x' * 1000,)] * 400\n"
                          "spark.createDataFrame(rows, 's string').createOrReplaceTempView('big')\n"
                          "spark.table('big').count()")
    assert r.status == "ok", r
    assert r.state == ()
    assert r.text.startswith("400\nnote: temporary view big is not kept if this session moves")
    assert "more than 256 KB" in r.text


async def _interrupt_soon(repl, statement, task, within=20.0):
    deadline = time.monotonic() + within
    while not task.done():
        assert time.monotonic() < deadline, "the statement did not start"
        if await repl.interrupt(statement):
            return time.monotonic()
        await asyncio.sleep(0.1)
    raise AssertionError(f"the statement ended first: {task.result()}")


@pytest.mark.parametrize("code", [
    # (sum(id) itself overflows a long after a few seconds: ANSI mode)
    "spark.range(10**12).selectExpr('sum(id % 7)').collect()",
    "import time\nprint('sleeping')\nwhile True:\n    time.sleep(600)",
], ids=["spark-job", "sleep"])
async def test_interrupt(repl, code):
    r = await repl.run(1, "1", timeout=120)
    assert r.status == "ok"
    task = asyncio.ensure_future(repl.run(2, code, timeout=120))
    await asyncio.sleep(1.5)  # (let it get going: an interrupt before it starts is tested below)
    assert not task.done(), task.result()
    sent = await _interrupt_soon(repl, 2, task)
    r = await asyncio.wait_for(task, 15)
    assert time.monotonic() - sent < 15
    assert (r.status, r.ename, r.evalue) == (
        "error", "KeyboardInterrupt", "the statement was cancelled"), r
    assert await repl.interrupt(2) is False   # no longer running
    r = await repl.run(3, "'still here'", timeout=60)
    assert (r.status, r.text) == ("ok", "'still here'")


async def test_interrupt_waiting_statement(repl):
    first = asyncio.ensure_future(repl.run(1, "import time\ntime.sleep(3)\n'done'"))
    second = asyncio.ensure_future(repl.run(2, "'second'"))
    await asyncio.sleep(0.5)
    assert await repl.interrupt(2) is True
    assert await repl.interrupt(9) is False
    r1, r2 = await asyncio.wait_for(asyncio.gather(first, second), 60)
    assert (r1.status, r1.text) == ("ok", "'done'")
    assert (r2.status, r2.ename) == ("error", "KeyboardInterrupt")


async def test_end_of_input_ends_the_process(repl):
    task = asyncio.ensure_future(repl.run(1, "import time\nwhile True:\n    time.sleep(600)"))
    await asyncio.sleep(1.0)
    pid = repl.proc.pid
    repl.proc.stdin.close()
    deadline = time.monotonic() + 15
    while repl.proc.returncode is None:
        assert time.monotonic() < deadline, "the process did not end"
        await asyncio.sleep(0.1)
    with pytest.raises(Exception) as info:
        await asyncio.wait_for(task, 10)
    assert type(info.value).__name__ == "WorkerLost"
    assert not os.path.exists(f"/proc/{pid}/status") or "zombie" in open(
        f"/proc/{pid}/status").read()
