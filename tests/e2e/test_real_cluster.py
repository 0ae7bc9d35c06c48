"""End to end: 3 real peer processes started with bin/jobmanager.sh, each with its own
Spark Connect server (real JVMs), jobs through REST, whole-cluster restart."""
import collections
import glob
import os
import re
import signal
import subprocess
import sys
import uuid

import pytest

from tests.e2e.procs import ProcessCluster, assert_gone, started
from tests.helpers import ROOT, http, multipart, poll

pytestmark = pytest.mark.slow
TEXT = os.path.join(ROOT, "examples", "data", "words.txt")
from jm.policy.jobs.vocab import TERMINAL  # the states a job ends in


def wait_job(url: str, jid: str, timeout: float = 180) -> dict:
    return poll(lambda: (lambda s_b: s_b[1] if s_b[0] == 200 and s_b[1]["state"] in TERMINAL
                         else None)(http("GET", f"{url}/jobs/{jid}")), timeout, interval=0.2,
                what=f"job {jid} to end")


CONNECT_TOKEN = "e2e-shared-connect-token"  # spark.connect.token: another peer may use it


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("e2e"))
    c = ProcessCluster(base, 3, {"spark.connect.embedded": True, "spark.master": "local[1]",
                                 "spark.connect.token": CONNECT_TOKEN,  # (to share one)
                                 "spark.driver.memory": "512m",
                                 "spark.conf.spark.sql.shuffle.partitions": 2})
    with started(c, spark=True):
        yield c


def expected_counts() -> collections.Counter:
    words = re.split(r"[^a-z']+", open(TEXT).read().lower())
    return collections.Counter(w for w in words if w)


def test_wordcount_through_rest_on_every_peer(cluster):
    code = open(os.path.join(ROOT, "examples", "wordcount.py"), "rb").read()
    payload, ctype = multipart("wordcount.py", code)
    s, art = http("POST", cluster.urls[0] + "/artifacts", raw=payload,
                  headers={"Content-Type": ctype})
    assert s == 201, art
    ids = []
    for i, url in enumerate(cluster.urls):
        out = os.path.join(cluster.base, f"wc-{i}")
        s, b = http("POST", url + "/jobs", {"entry": "wordcount:main", "pyfiles": [art["pyfile"]],
                                            "args": {"input": TEXT, "output": out, "top": 3}})
        assert s == 202, b
        ids.append(b["jobid"])
    exp = expected_counts()
    top3 = sorted(exp.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
    nodes = set()
    for jid in ids:
        job = wait_job(cluster.urls[1], jid)
        assert job["state"] == "FINISHED", http("GET", cluster.urls[1] + f"/jobs/{jid}/exceptions")
        res = job["result"]
        assert res["distinct-words"] == len(exp)
        assert res["total-words"] == sum(exp.values())
        assert [tuple(x) for x in res["top"]] == top3
        assert os.path.isdir(res["output"])  # Parquet written
        nodes.add(job["node"])
    assert len(nodes) >= 2, nodes


def test_sql_job_keeps_rows(cluster):
    s, b = http("POST", cluster.urls[2] + "/jobs",
                {"sql": "SELECT id, id * id AS sq FROM range(10) ORDER BY id"})
    assert s == 202
    job = wait_job(cluster.urls[0], b["jobid"])
    assert job["state"] == "FINISHED"
    s, res = http("GET", cluster.urls[1] + f"/jobs/{b['jobid']}/result")
    assert res["result"]["columns"] == ["id", "sq"]
    assert res["result"]["rows"] == [[i, i * i] for i in range(10)]


def test_connect_mode_application_with_a_udf_from_py_files(cluster, tmp_path):
    """examples/etl.py unchanged, in connect mode: a session on the peer's Connect server;
    its --py-files module reaches the server's Python workers (the UDF imports it)."""
    import subprocess
    import sys
    out = str(tmp_path / "etl-connect")
    r = subprocess.run([sys.executable, "-m", "jm.client.cli", "run",
                        os.path.join(ROOT, "examples", "etl.py"), "-", out, "--mode", "connect",
                        "--py-files", os.path.join(ROOT, "examples", "etl_helpers.py"),
                        "--wait"], cwd=ROOT, env=cluster.env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-2000:])
    lines = [ln for ln in r.stdout.splitlines() if re.fullmatch(r"\w+\t\d+\t[\d.]+", ln)]
    assert lines == ["DE\t6\t76.5", "FR\t6\t90.0", "US\t6\t99.0", "unknown\t3\t49.5"], lines
    assert any(f.endswith(".parquet") for f in os.listdir(out))


def test_spark_server_crash_restarts_server_and_the_jobs_using_it(cluster):
    import psutil
    s, b = http("POST", cluster.urls[0] + "/jobs",
                {"entry": "spark_load:main", "pyfiles": [os.path.join(ROOT, "bench") + "/"],
                 "args": {"seconds": 600},
                 "restart-strategy": {"type": "fixed-delay", "attempts": 5, "delay": "1 s"}})
    assert s == 202, b
    jid = b["jobid"]
    job = poll(lambda: (lambda j: j if j["state"] == "RUNNING" else None)(
        http("GET", cluster.urls[0] + f"/jobs/{jid}")[1]), 120, what="spark job running")
    i = next(k for k, line in enumerate(cluster.lines) if line.endswith(job["node"].split(":")[1]))
    url = cluster.urls[i]
    jvm = next(p for p in psutil.Process(cluster.peer_pid(i)).children()
               if "java" in p.name() or "java" in " ".join(p.cmdline()[:1]))
    log = os.path.join(cluster.base, "log", job["node"].replace(":", "_"), "jobs", jid,
                       f"attempt-{job['attempt']}-0.log")
    poll(lambda: "query 1" in open(log).read(), 120, what="the job ran a query on this JVM")
    # the server's Spark local dir is the peer's own (data dir), not /tmp: what a killed
    # JVM left there is emptied before the next one starts
    scratch = os.path.join(cluster.base, "data", job["node"].replace(":", "_"), "spark-local")
    before = set(glob.glob(os.path.join(scratch, "blockmgr-*")))
    assert before, os.listdir(os.path.dirname(scratch))
    jvm.kill()
    # the peer keeps serving, restarts its server, and the job is restarted per strategy
    poll(lambda: not http("GET", url + "/healthz")[1]["spark-ready"], 30, what="not ready")
    assert http("GET", url + "/overview")[0] == 200
    poll(lambda: http("GET", url + "/healthz")[1]["spark-ready"], 240, interval=0.5,
         what="Spark Connect server restarted")
    after = poll(lambda: (lambda j: j if j["restarts"] >= 1 and j["state"] == "RUNNING"
                          else None)(http("GET", url + f"/jobs/{jid}")[1]), 240, interval=0.5,
                 what="job restarted after the crash")
    assert after["attempt"] == job["attempt"]  # a restart on the same peer, not a move
    now = set(glob.glob(os.path.join(scratch, "blockmgr-*")))
    assert now and not now & before, (before, now)
    s, _ = http("PATCH", url + f"/jobs/{jid}?mode=cancel")
    assert s == 202
    assert wait_job(url, jid, 60)["state"] == "CANCELED"


def test_frozen_peer_loses_its_spark_jvm_with_its_lease(cluster):
    """Streaming queries live in the Spark JVM, not in the job process: when a frozen
    peer's lease runs out, its zygote kills the JVM too; the peer starts a new one."""
    import psutil
    i = 2
    pid = cluster.peer_pid(i)
    jvm = next(p for p in psutil.Process(pid).children() if "java" in p.name())
    os.kill(pid, signal.SIGSTOP)
    try:
        poll(lambda: not psutil.pid_exists(jvm.pid) or jvm.status() == "zombie", 2.0 + 1.5,
             interval=0.05, what="the frozen peer's JVM killed at lease expiry")
    finally:
        os.kill(pid, signal.SIGCONT)
    poll(lambda: http("GET", cluster.urls[i] + "/healthz")[1]["spark-ready"], 240,
         interval=0.5, what="a new Spark Connect server")
    poll(lambda: http("GET", cluster.urls[i] + "/healthz")[1]["ok"], 30, what="peer healthy")


def test_sql_through_rest_and_jm_sql_on_any_peer(cluster):
    """Flink SQL Gateway's REST flow with the session opened on one peer and used through
    the others; `jm sql -e` against the cluster's peers."""
    s, b = http("POST", cluster.urls[0] + "/v1/sessions", {"properties": {}})
    assert s == 200, b
    sh = b["sessionHandle"]
    s, b = http("POST", cluster.urls[1] + f"/v1/sessions/{sh}/statements",
                {"statement": "SELECT id, id * id AS sq FROM range(3)"})
    assert s == 200, b
    uri = f"/v1/sessions/{sh}/operations/{b['operationHandle']}/result/0?rowFormat=JSON"
    rows = []
    while uri:
        s, page = http("GET", cluster.urls[2] + uri)
        assert s == 200, page
        rows += [d["fields"] for d in (page.get("results") or {}).get("data") or []]
        uri = page.get("nextResultUri")
    assert rows == [[0, 0], [1, 1], [2, 4]]
    assert http("DELETE", cluster.urls[2] + f"/v1/sessions/{sh}")[0] == 200
    r = subprocess.run([sys.executable, "-m", "jm.client.cli", "sql", "--address",
                        ",".join(cluster.urls), "--format", "csv", "-e",
                        "SELECT 40 + 2 AS answer; SELECT 'a' AS s"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["answer", "42", "s", "a"], r.stdout


def test_sql_session_survives_a_sigkill_of_its_peer(cluster):
    """A DB-API connection (one SQL gateway session) goes on after its peer is SIGKILLed:
    the session moves, its temporary view is rebuilt on the new peer's Spark server."""
    from jm.client import dbapi
    conn = dbapi.connect(cluster.urls)
    killed = None
    try:
        cur = conn.cursor()
        cur.execute("CREATE TEMP VIEW nums AS SELECT id FROM range(100)")
        cur.execute("SELECT sum(id) FROM nums")
        assert cur.fetchall() == [(4950,)]
        node = conn._session.info()["node"]
        i = next(k for k, line in enumerate(cluster.lines)
                 if line.endswith(":" + node.split(":")[1]))
        os.kill(cluster.peer_pid(i), signal.SIGKILL)
        killed = i
        cur.execute("SELECT sum(id) * 2 AS twice FROM nums")  # waits for the move
        assert cur.fetchall() == [(9900,)]
        info = conn._session.info()
        assert info["node"] != node and info["moves"] == 1
    finally:
        conn.close()
        if killed is not None:  # the module's later tests want 3 peers
            restart_peer(cluster, killed)


def restart_peer(cluster, i: int) -> None:
    """Peer i started again, healthy, its Spark server ready: the module's later tests
    want 3 peers."""
    cluster.start_peer(i)
    cluster.wait_healthy(i)
    cluster.wait_spark([i])


def sql_session(cluster) -> tuple[str, str, int]:
    """A session opened through peer 0: its handle, its peer's node and index."""
    s, b = http("POST", cluster.urls[0] + "/v1/sessions", {"properties": {}})
    assert s == 200, b
    sh = b["sessionHandle"]
    node = http("GET", cluster.urls[0] + f"/v1/sessions/{sh}")[1]["node"]
    i = next(k for k, line in enumerate(cluster.lines) if line.endswith(":" + node.split(":")[1]))
    return sh, node, i


def sql_start(url: str, sh: str, sql: str, headers: dict | None = None) -> str:
    """A statement in session `sh` through the peer at `url`: its operation handle."""
    s, b = http("POST", url + f"/v1/sessions/{sh}/statements", {"statement": sql},
                headers=headers, timeout=60)
    assert s == 200, b
    return b["operationHandle"]


def sql_rows(url: str, sh: str, oh: str) -> list:
    """Every row of an operation, page after page to the end."""
    uri, out = f"/v1/sessions/{sh}/operations/{oh}/result/0", []
    while uri:
        s, page = http("GET", url + uri, timeout=60)
        assert s == 200, page
        out += [d["fields"] for d in (page.get("results") or {}).get("data") or []]
        uri = None if page["resultType"] == "EOS" else page.get("nextResultUri")
    return out


def test_sql_request_through_another_peer_survives_a_frozen_holder(cluster):
    """The peer holding a session frozen (SIGSTOP): a statement sent through another peer
    is not held by the silent holder; it runs on the session's new peer once it moved."""
    sh, node, i = sql_session(cluster)
    via = cluster.urls[(i + 1) % 3]

    def run(sql: str, request_id: str) -> list:
        return sql_rows(via, sh, sql_start(via, sh, sql, {"X-Request-Id": request_id}))
    assert run("SELECT 1 AS one", "first") == [[1]]
    pid = cluster.peer_pid(i)
    os.kill(pid, signal.SIGSTOP)
    try:
        assert run("SELECT 2 AS two", "second") == [[2]]
        s, info = http("GET", via + f"/v1/sessions/{sh}")
        assert info["node"] != node and info["moves"] == 1, info
    finally:
        os.kill(pid, signal.SIGKILL)
        assert_gone([pid], "the frozen peer")
        restart_peer(cluster, i)
    assert http("DELETE", via + f"/v1/sessions/{sh}")[0] == 200


def test_a_plain_rest_client_never_sees_the_sigkill_of_its_sessions_peer(cluster, tmp_path):
    """Flink's SQL Gateway REST protocol from a client that sends no X-Request-Id (Flink's
    SQL Client, curl): the session is opened through one peer, its state made through
    another, and the peer holding it is SIGKILLed while the peer the client talks to holds
    pooled connections to it. A read sent after the kill runs on the session's new peer
    (no 503); a write that had finished is answered from the session's record (not "may
    or may not have run"); a write sent after the kill runs there."""
    sh, node, i = sql_session(cluster)
    via = cluster.urls[(i + 1) % 3]
    other = cluster.urls[(i + 2) % 3]
    first, second = (os.path.join(str(tmp_path), d) for d in ("first", "second"))

    def start(url: str, sql: str) -> str:  # (no X-Request-Id)
        return sql_start(url, sh, sql)

    def rows(url: str, oh: str) -> list:
        return sql_rows(url, sh, oh)
    rows(other, start(other, "CREATE TEMP VIEW t AS SELECT id FROM range(7)"))
    assert rows(via, start(via, "SELECT count(*) AS n FROM t")) == [[7]]
    write = start(via, f"INSERT OVERWRITE DIRECTORY '{first}' USING parquet SELECT 1 AS x")
    poll(lambda: http("GET", via + f"/v1/sessions/{sh}/operations/{write}/status")[1]
         .get("status") == "FINISHED", 120, interval=0.2, what="the write finished")
    pid = cluster.peer_pid(i)
    os.kill(pid, signal.SIGKILL)
    try:
        assert rows(via, start(via, "SELECT count(*) AS n FROM t")) == [[7]]  # no 503
        s, b = http("GET", via + f"/v1/sessions/{sh}/operations/{write}/status")
        assert s == 200 and b["status"] == "FINISHED", b  # from the record, not run again
        rows(via, start(via, f"INSERT OVERWRITE DIRECTORY '{second}' USING parquet "
                             "SELECT 2 AS x"))
        assert rows(other, start(other, f"SELECT x FROM parquet.`{first}` UNION ALL "
                                        f"SELECT x FROM parquet.`{second}` ORDER BY x")) \
            == [[1], [2]]
        s, info = http("GET", via + f"/v1/sessions/{sh}")
        assert info["node"] != node and info["moves"] == 1, info
    finally:
        assert_gone([pid], "the killed peer")
        restart_peer(cluster, i)
    assert http("DELETE", via + f"/v1/sessions/{sh}")[0] == 200


def test_a_streaming_job_killed_while_writing_its_first_batch_runs_again(cluster, tmp_path):
    """A SIGKILL while Spark wrote batch 0's offsets leaves `.0.<uuid>.tmp` in the query's
    offsets log, and Spark refuses batch 0 of a query whose offsets log holds anything
    (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY; seen in a chaos run: 99 attempts failed):
    the next attempt sweeps it and runs."""
    from chaos.streaming import FLUSH_TS, write_events
    jid = f"halfwritten-{uuid.uuid4().hex[:8]}"
    query = os.path.join(cluster.base, "ha", jid, "checkpoints", "events")
    os.makedirs(os.path.join(query, "commits"))
    os.makedirs(os.path.join(query, "offsets"))
    tmp = uuid.uuid4()
    for name in (f".0.{tmp}.tmp", f"..0.{tmp}.tmp.crc"):
        with open(os.path.join(query, "offsets", name), "w") as f:
            f.write('v1\n{"batchWatermarkMs":0')  # cut short by the kill
    src, sink = tmp_path / "events", tmp_path / "agg"
    src.mkdir()
    write_events(str(src), "f0", [{"user": "u1", "ts": "2026-01-01T00:00:05", "amount": 3}])
    write_events(str(src), "flush", [{"user": "flush", "ts": FLUSH_TS, "amount": 0}])
    s, b = http("POST", cluster.urls[0] + "/jobs", {
        "jobid": jid, "entry": "streaming_events:main", "job-type": "streaming",
        "pyfiles": [os.path.join(ROOT, "examples", "streaming_events.py")],
        "args": {"input": str(src), "output": str(sink), "trigger": "1 second"}})
    assert s == 202, b

    def committed_or_ended():
        job = http("GET", f"{cluster.urls[0]}/jobs/{jid}")[1]
        done = os.path.exists(os.path.join(query, "commits", "0"))
        return job if done or job["state"] in TERMINAL else None
    job = poll(committed_or_ended, 180, interval=0.5, what="batch 0 committed")
    assert job["state"] == "RUNNING", http("GET", f"{cluster.urls[0]}/jobs/{jid}/exceptions")
    assert os.path.exists(os.path.join(query, "commits", "0"))
    assert http("PATCH", f"{cluster.urls[0]}/jobs/{jid}?mode=cancel")[0] == 202
    assert wait_job(cluster.urls[0], jid)["state"] == "CANCELED"


async def test_spark_remote_uses_an_existing_connect_endpoint(cluster, tmp_path):
    """A peer configured with spark.remote starts no JVM and runs jobs on that endpoint."""
    from tests.conftest import InProcessCluster
    from tests.helpers import ahttp, apoll
    cluster.wait_spark(only=[0])  # e.g. still starting after the whole-cluster restart
    remote = http("GET", cluster.urls[0] + "/healthz")[1]["spark-remote"]
    c = InProcessCluster(str(tmp_path), 1, {"spark.remote": f"{remote}/;token={CONNECT_TOKEN}"})
    try:
        await c.start()
        assert c.peers[0].ground.sparks.server is None  # no embedded server
        s, b = await ahttp("POST", c.url(0) + "/jobs", {"sql": "SELECT 40 + 2 AS answer"})
        assert s == 202

        async def done():
            s, r = await ahttp("GET", c.url(0) + f"/jobs/{b['jobid']}/result")
            return r if r["state"] in TERMINAL else None
        res = await apoll(done, 120, interval=0.2, what="remote SQL job")
        assert res["state"] == "FINISHED", res
        assert res["result"]["rows"] == [[42]]
        # a job's own requirements reach that endpoint's Python workers as Spark's docs
        # ship a venv to a Connect session: an archive artifact, unpacked there
        s, b = await ahttp("POST", c.url(0) + "/jobs", {
            "entry": "envs_jobs:udf_versions", "requirements": ["tabulate==0.9.0"],
            "pyfiles": [os.path.join(ROOT, "tests", "integration") + "/"]})
        assert s == 202, b
        res = await apoll(done, 240, interval=0.2, what="remote job with requirements")
        assert res["state"] == "FINISHED", res
        assert (res["result"]["driver"], res["result"]["udf"]) == ("0.9.0", "0.9.0"), res
        assert "/jm-python/" in res["result"]["udf-file"], res  # the unpacked archive's
    finally:
        await c.stop()


def livy_run(url: str, n: int, code: str, kind: str = "") -> dict:
    """A statement of Livy session `n` through the peer at `url`, polled to its end."""
    s, b = http("POST", url + f"/sessions/{n}/statements",
                {"code": code, **({"kind": kind} if kind else {})}, timeout=60)
    assert s == 201, b
    return poll(lambda: (lambda r: r[1] if r[1].get("state") in ("available", "cancelled")
                         else None)(http("GET", url + f"/sessions/{n}/statements/{b['id']}")),
                120, interval=0.2, what=f"Livy statement {b['id']}")


def test_a_notebook_s_livy_session_goes_on_after_its_peer_is_sigkilled(cluster):
    """A Livy pyspark session (Jupyter's sparkmagic) holds a Python variable, a temporary
    view made from a DataFrame and a Spark setting; its peer is SIGKILLed while a
    statement runs there. That statement ends saying it was not run again; the next one,
    sent through another peer, runs on the session's new peer and says the Python
    variables were lost, and the view and the setting are there (replayed); SQL too."""
    s, b = http("POST", cluster.urls[0] + "/sessions", {"kind": "pyspark"})
    assert s == 201, b
    n, node = b["id"], b["appInfo"]["peer"]
    i = next(k for k, line in enumerate(cluster.lines) if line.endswith(":" + node.split(":")[1]))
    via = cluster.urls[(i + 1) % 3]
    made = livy_run(cluster.urls[i], n, "x = 41\nspark.range(7).createOrReplaceTempView('t')\n"
                    "spark.conf.set('spark.sql.shuffle.partitions', '5')\nx + 1")
    assert made["output"]["data"]["text/plain"] == "42", made
    s, slow = http("POST", via + f"/sessions/{n}/statements",
                   {"code": "import time\nfor _ in range(600): time.sleep(0.1)"})
    assert s == 201, slow
    poll(lambda: http("GET", via + f"/sessions/{n}/statements/{slow['id']}")[1]["state"]
         == "running", 60, interval=0.1, what="the slow statement running")
    pid = cluster.peer_pid(i)
    os.kill(pid, signal.SIGKILL)
    try:
        after = livy_run(via, n, "print(spark.sql('SELECT count(*) FROM t').first()[0])\n"
                         "print(spark.conf.get('spark.sql.shuffle.partitions'))")
        text = after["output"]["data"]["text/plain"]
        assert "Python variables of earlier statements were lost" in text, after
        assert text.splitlines()[-2:] == ["7", "5"], after
        lost = http("GET", via + f"/sessions/{n}/statements/{slow['id']}")[1]
        assert lost["output"]["ename"] == "SessionMoved", lost
        gone = livy_run(via, n, "x")
        assert gone["output"]["ename"] == "NameError", gone
        rows = livy_run(via, n, "SELECT count(*) AS n FROM t", kind="sql")
        assert rows["output"]["data"]["application/json"]["data"] == [[7]], rows
        s, b = http("GET", via + f"/sessions/{n}")
        assert b["appInfo"]["peer"] != node and b["state"] == "idle", b
    finally:
        assert_gone([pid], "the killed peer")
        restart_peer(cluster, i)
    assert http("DELETE", via + f"/sessions/{n}")[0] == 200


# last: the whole cluster restarts (the tests before use its warm Spark servers)
def test_cancel_and_whole_cluster_restart_keeps_jobs(cluster):
    fix = os.path.join(ROOT, "tests", "integration") + "/"
    s, b = http("POST", cluster.urls[1] + "/jobs", {"entry": "jobs_fixture:sleepy",
                                                    "pyfiles": [fix], "args": {"seconds": 300}})
    sleepy = b["jobid"]
    poll(lambda: http("GET", cluster.urls[0] + f"/jobs/{sleepy}")[1]["state"] == "RUNNING", 60)
    s, _ = http("PATCH", cluster.urls[2] + f"/jobs/{sleepy}?mode=cancel")
    assert s == 202
    assert wait_job(cluster.urls[0], sleepy, 60)["state"] == "CANCELED"
    s, before = http("GET", cluster.urls[0] + "/jobs")
    assert len(before["jobs"]) >= 5
    old_pids = cluster.pids()
    cluster.stop()
    for pid in old_pids:
        poll(lambda p=pid: not os.path.exists(f"/proc/{p}"), 30, what=f"peer {pid} gone")
    cluster.start()
    for url in cluster.urls:
        s, after = http("GET", url + "/jobs")
        assert [(j["id"], j["status"]) for j in after["jobs"]] == \
            [(j["id"], j["status"]) for j in before["jobs"]]
    s, job = http("GET", cluster.urls[2] + f"/jobs/{sleepy}")
    assert job["state"] == "CANCELED"
