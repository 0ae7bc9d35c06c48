"""Engines with share levels through the real parts (one in-process peer, real Raft and
REST, real Spark Connect JVMs, real job processes and SQL worker, real cgroups as root):
at `share-level: tenant` each tenant's connect-mode jobs and SQL sessions run on its own
engine, started on demand, in a cgroup of its tenant's memory and CPU; an engine whose JVM
dies takes down only its tenant's jobs (which say so), and an engine nobody uses any more
is stopped after its idle timeout, its cgroup with it."""
import os
import signal

import pytest

from jm.policy.jobs.vocab import TERMINAL
from jm.runtime.cgroups import layout
from tests.conftest import running
from tests.helpers import CLASS_ARCHIVE, ahttp, apoll

pytestmark = pytest.mark.slow
CGROUPS = os.geteuid() == 0 and layout() is not None  # engines get cgroups: checked

ROOT = "root-token"
FIX = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "integration") + "/"
JOB = {"entry": "jobs_fixture:spark_until_stop", "pyfiles": [FIX],
       "restart-strategy": {"type": "fixed-delay", "attempts": 3, "delay": "1 s"}}


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


async def _credential(c, tenant):
    s, b = await ahttp("POST", c.url(0) + "/tokens", {"name": f"{tenant}-sub",
                                                      "role": "submit", "tenant": tenant},
                       headers=bearer(ROOT))
    assert s == 201, b
    return bearer(b["token"])


async def _engines(c) -> dict:
    s, b = await ahttp("GET", c.url(0) + "/healthz", headers=bearer(ROOT))
    assert s == 200 and b["share-level"] == "tenant", b
    return {e["engine"]: e for e in b["engines"]}


async def _job(c, jid, headers):
    s, b = await ahttp("GET", c.url(0) + f"/jobs/{jid}", headers=headers)
    assert s == 200, b
    return b


async def _statement(c, headers, sql):
    """A new SQL session of the caller's tenant and a statement in it: their handles."""
    s, body = await ahttp("POST", c.url(0) + "/v1/sessions", {}, headers=headers)
    assert s == 200, body
    sh = body["sessionHandle"]
    s, body = await ahttp("POST", c.url(0) + f"/v1/sessions/{sh}/statements",
                          {"statement": sql}, headers=headers)
    assert s == 200, body
    return sh, body["operationHandle"]


async def _ended(c, jid, headers):
    job = await _job(c, jid, headers)
    return job if job["state"] in TERMINAL else None


async def _answered(c, jid, headers):
    """The job runs and its Spark session answered (its log says so)."""
    s, b = await ahttp("GET", c.url(0) + f"/jobs/{jid}/logs", headers=headers)
    return s == 200 and "spark answered" in b.get("text", "")


async def test_each_tenant_has_its_engine_and_an_engine_s_death_stays_with_its_tenant(
        tmp_path):
    # (the run's class-data archive, made in the background at its start: here before
    # the engines start, so that they map it)
    await apoll(lambda: os.path.exists(CLASS_ARCHIVE), 300, interval=0.5,
                what=f"the class-data archive {CLASS_ARCHIVE}")
    settings = {"rest.auth.token": ROOT, "spark.connect.embedded": True,
                "spark.connect.share-level": "tenant", "spark.master": "local[1]",
                "spark.driver.memory": "512m", "spark.connect.engine.idle-timeout": "10 s",
                "jobmanager.slots": 4}
    async with running(str(tmp_path), 1, settings) as c:
        a, b = await _credential(c, "a"), await _credential(c, "b")
        assert await _engines(c) == {}  # none before its work arrives
        s, body = await ahttp("PUT", c.url(0) + "/tenants/b", {"memory": "1 gb", "cpu": 50},
                              headers=bearer(ROOT))  # b's engines: a cgroup of their own
        assert s == 200 and (body["memory"], body["cpu"]) == (1 << 30, 50), body
        ids = {}
        for t, h in (("a", a), ("b", b)):
            s, body = await ahttp("POST", c.url(0) + "/jobs", JOB, headers=h)
            assert s == 202, body
            ids[t] = body["jobid"]
        for t, h in (("a", a), ("b", b)):
            await apoll(lambda t=t, h=h: _answered(c, ids[t], h), 240,
                        what=f"tenant {t}'s job answered by Spark")
        engines = await _engines(c)
        assert set(engines) == {"tenant-a", "tenant-b"}, engines
        pa, pb = engines["tenant-a"]["pid"], engines["tenant-b"]["pid"]
        assert pa and pb and pa != pb and engines["tenant-a"]["url"] != engines["tenant-b"]["url"]
        assert engines["tenant-a"]["holders"] == 1
        for pid in (pa, pb):  # the class-data archive (spark.class-archive) maps: their
            with open(f"/proc/{pid}/maps") as f:  # class path is the archive's (a JVM
                assert CLASS_ARCHIVE in f.read()  # unmaps one that does not match)
        cgroup = _cgroup_of(pb)
        if CGROUPS:  # (a v1 memory hierarchy, or v2)
            assert cgroup and cgroup.endswith(f"jm-engines/{os.getpid()}-tenant-b"), cgroup
            assert _limit(cgroup) == 1 << 30
            assert _cgroup_of(pa) is None  # a has no limits: no cgroup

        # a's job has its engine's token, not b's: b's engine does not open to it
        s, body = await ahttp("POST", c.url(0) + "/jobs", {
            "entry": "jobs_fixture:open_engine", "pyfiles": [FIX],
            "args": {"url": engines["tenant-b"]["url"]}, "restart-strategy": {"type": "none"}},
            headers=a)
        assert s == 202, body
        probe = await apoll(lambda: _ended(c, body["jobid"], a), 120, what="the probe ended")
        assert probe["state"] == "FINISHED" and probe["result"].startswith("refused"), probe

        # a SQL session of tenant b runs on b's engine
        sh, oh = await _statement(c, b, "SELECT 42 AS x")

        async def fetched():
            s, r = await ahttp("GET", c.url(0) + f"/v1/sessions/{sh}/operations/{oh}/result/0",
                               headers=b)
            assert s == 200, r
            return r if r["resultType"] != "NOT_READY" else None
        page = await apoll(fetched, 120, what="the SQL statement's first page")
        assert [d["fields"] for d in page["results"]["data"]] == [[42]], page
        assert (await _engines(c))["tenant-b"]["holders"] == 2  # its job and its session
        await _connect_client_on_its_tenants_engine(c, b)
        worker = c.peers[0].parts.sql.host.workers.find(engines["tenant-b"]["url"])
        assert worker is not None and worker.alive
        if CGROUPS:  # b's Livy code runs within b's memory (a cgroup of its own)
            assert await _livy_memory_limit(c, b) == 1 << 30

        # tenant a's engine dies: a's job says so and restarts; b's job runs on untouched
        os.kill(pa, signal.SIGKILL)

        async def a_restarted():
            job = await _job(c, ids["a"], a)
            return job if job["restarts"] >= 1 and job["state"] == "RUNNING" else None
        await apoll(a_restarted, 240, what="tenant a's job restarted")
        s, ex = await ahttp("GET", c.url(0) + f"/jobs/{ids['a']}/exceptions", headers=a)
        assert s == 200 and "EngineLost: the Spark engine tenant-a" in str(ex), ex
        await apoll(lambda: _answered(c, ids["a"], a), 240, what="a's job answered again")
        job_b = await _job(c, ids["b"], b)
        assert job_b["state"] == "RUNNING" and job_b["restarts"] == 0, job_b
        engines = await _engines(c)
        assert engines["tenant-b"]["pid"] == pb and engines["tenant-a"]["restarts"] == 1

        # a's job ends: its engine idles out (10 s) and is stopped; b's stays
        s, body = await ahttp("PATCH", c.url(0) + f"/jobs/{ids['a']}", headers=a)
        assert s == 202, body

        async def a_gone():
            e = await _engines(c)
            return e if "tenant-a" not in e else None
        left = await apoll(a_gone, 90, what="tenant a's idle engine stopped")
        assert set(left) == {"tenant-b"}, left
        restarted = engines["tenant-a"]["pid"]  # the JVM of a's engine after its restart
        await apoll(lambda: not _alive(restarted), 30, what="its JVM gone")
    if CGROUPS:  # its cgroup went with its engine
        assert not os.path.exists(_cgroup_dir(cgroup)), cgroup


CONNECT_CODE = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.remote(sys.argv[1]).create()
print(spark.range(5).count(), flush=True)
sys.stdin.readline()
spark.stop()
"""


async def _connect_client_on_its_tenants_engine(c, headers) -> None:
    """A Spark Connect client of tenant b, through the peer's endpoint: its session holds
    b's engine until it is released."""
    import asyncio
    import sys
    s, nodes = await ahttp("GET", c.url(0) + "/nodes", headers=bearer(ROOT))
    port = nodes["nodes"][0]["connect-endpoint"].rsplit(":", 1)[1]
    token = headers["Authorization"].split()[1]  # (no TLS: pyspark sends it to localhost)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CONNECT_CODE, f"sc://localhost:{port}/;token={token}",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 120)
        assert line.strip() == b"5", (line, (await proc.stderr.read())[-2000:])
        assert (await _engines(c))["tenant-b"]["holders"] == 3
        proc.stdin.write(b"done\n")
        await proc.stdin.drain()
        assert await asyncio.wait_for(proc.wait(), 60) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    await apoll(lambda: _holders(c, "tenant-b", 2), 30, what="the Connect session released")


async def _holders(c, engine: str, n: int) -> bool:
    return (await _engines(c))[engine]["holders"] == n


LIMIT_CODE = """
import os
for line in open("/proc/self/cgroup"):
    _, ctl, path = line.rstrip().split(":", 2)
    if ctl in ("", "memory") or "memory" in ctl.split(","):
        d = "/sys/fs/cgroup" + ("" if ctl == "" else "/memory") + path
        for name in ("memory.max", "memory.limit_in_bytes"):
            if os.path.exists(os.path.join(d, name)):
                print(path, open(os.path.join(d, name)).read().strip(), spark.range(3).count())
"""


async def _livy_memory_limit(c, headers) -> int:
    """The memory limit of the cgroup a Livy pyspark session's code runs in."""
    s, b = await ahttp("POST", c.url(0) + "/sessions", {"kind": "pyspark"}, headers=headers)
    assert s == 201, b
    n = b["id"]
    s, b = await ahttp("POST", c.url(0) + f"/sessions/{n}/statements", {"code": LIMIT_CODE},
                       headers=headers)
    assert s == 201, b

    async def done():
        s, b = await ahttp("GET", c.url(0) + f"/sessions/{n}/statements/0", headers=headers)
        return b if b["state"] in ("available", "error") else None
    out = (await apoll(done, 120, what="the Livy statement"))["output"]
    assert out["status"] == "ok", out
    path, limit, count = out["data"]["text/plain"].split()
    assert "jm-jobs/confined-" in path and count == "3", out
    s, b = await ahttp("DELETE", c.url(0) + f"/sessions/{n}", headers=headers)
    assert s == 200, b
    return int(limit)


def _cgroup_of(pid: int):
    """The engine's own cgroup path (memory hierarchy on v1), None when it has none."""
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            _, controllers, path = line.strip().split(":", 2)
            if "jm-engines/" in path and (controllers in ("", "memory")
                                          or "memory" in controllers.split(",")):
                return path
    return None


def _cgroup_dir(path: str) -> str:
    v2 = os.path.exists("/sys/fs/cgroup/cgroup.controllers")
    return "/sys/fs/cgroup" + ("" if v2 else "/memory") + path


def _limit(path: str) -> int:
    d = _cgroup_dir(path)
    name = "memory.max" if os.path.exists(os.path.join(d, "memory.max")) \
        else "memory.limit_in_bytes"
    with open(os.path.join(d, name)) as f:
        return int(f.read())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _uid(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(next(line.split()[1] for line in f if line.startswith("Uid:")))


def _python_readable() -> bool:
    from tests.integration.test_livy_sessions import python_readable
    return python_readable()


@pytest.mark.skipif(os.geteuid() != 0 or not _python_readable(),
                    reason="needs root, and a Python other users can run (not under /root)")
async def test_a_tenant_s_engine_sql_worker_and_jobs_run_as_its_os_user(tmp_path):
    import pwd
    from tests.integration.test_job_isolation import _open_up
    _open_up(tmp_path)
    nobody = pwd.getpwnam("nobody").pw_uid
    settings = {"rest.auth.token": ROOT, "spark.connect.embedded": True,
                "spark.connect.share-level": "tenant", "spark.master": "local[1]",
                "spark.driver.memory": "512m"}
    async with running(str(tmp_path), 1, settings) as c:
        s, b = await ahttp("PUT", c.url(0) + "/tenants/a", {"os-user": "nobody"},
                           headers=bearer(ROOT))
        assert s == 200 and b["os-user"] == "nobody", b
        a = await _credential(c, "a")
        s, body = await ahttp("POST", c.url(0) + "/jobs", JOB, headers=a)
        assert s == 202, body
        jid = body["jobid"]
        await apoll(lambda: _answered(c, jid, a), 240, what="the job answered by Spark")
        engine = (await _engines(c))["tenant-a"]
        assert _uid(engine["pid"]) == nobody  # (its JVM: the child of the pdeathsig exec)
        await _statement(c, a, "SELECT 1")
        worker = await apoll(lambda: (w := c.peers[0].parts.sql.host.workers.find(engine["url"]))
                             and w.proc and w, 60, what="the tenant's SQL worker")
        assert _uid(worker.proc.pid) == nobody
        s, body = await ahttp("PATCH", c.url(0) + f"/jobs/{jid}", headers=a)
        assert s == 202, body
