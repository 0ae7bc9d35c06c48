"""Script jobs through real peers (in-process cluster, real job processes), without Spark:
run as __main__ with sys.argv, exit codes and exceptions, zips and pyfiles, bad input,
and the fencing of what an attempt leaves behind (its process group, a child with the
driver's parent-death signal)."""
import io
import json
import os
import textwrap
import zipfile

import pytest

from tests.helpers import ahttp, apoll, asubmit_to, multipart
from jm.policy.spark.engines import PEER_ENGINE
from jm.policy.jobs.vocab import TERMINAL


async def _ended(c, jid, peer=0, timeout=60):
    async def check():
        s, b = await ahttp("GET", c.url(peer) + f"/jobs/{jid}")
        return b if s == 200 and b["state"] in TERMINAL else None
    return await apoll(check, timeout, what=f"job {jid} to end")


def _script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


async def test_script_runs_as_main_with_argv(cluster3, tmp_path):
    out = tmp_path / "out.json"
    app = _script(tmp_path, "my_app.py", f"""
        import json, os, sys
        import helper_mod
        if __name__ == "__main__":
            json.dump({{"argv": sys.argv, "helper": helper_mod.VALUE,
                       "job": os.environ.get("JM_JOB_ID"),
                       "attempt": os.environ.get("JM_ATTEMPT"),
                       "checkpoint": os.environ.get("JM_CHECKPOINT_DIR")}},
                      open({str(out)!r}, "w"))
            print("driver says hello")
        """)
    helper_dir = tmp_path / "lib"
    helper_dir.mkdir()
    (helper_dir / "helper_mod.py").write_text("VALUE = 42\n")
    jid = await asubmit_to(cluster3, {"script": app, "argv": ["in path", "--flag"],
                                      "pyfiles": [str(helper_dir / "helper_mod.py")],
                                      "spark-mode": "connect"}, peer=1)
    job = await _ended(cluster3, jid)
    assert job["state"] == "FINISHED", job
    seen = json.loads(out.read_text())
    assert seen["argv"] == ["my_app.py", "in path", "--flag"]
    assert seen["helper"] == 42
    assert seen["job"] == jid and seen["attempt"] == "1"
    assert seen["checkpoint"].endswith(os.path.join(jid, "checkpoints"))
    assert job["name"] == "my_app.py" and job["spec"]["spark-mode"] == "connect"
    s, logs = await ahttp("GET", cluster3.url(0) + f"/jobs/{jid}/logs")
    assert s == 200 and "driver says hello" in logs["text"]


@pytest.mark.parametrize("body,expect", [
    ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
    ("raise ValueError('bad input row 7')\n", "ValueError: bad input row 7"),
    ("import sys\nsys.exit('cannot read /data/x')\n", "SystemExit: cannot read /data/x"),
])
async def test_script_failures_reach_the_exceptions(cluster3, tmp_path, body, expect):
    app = _script(tmp_path, "fails.py", body)
    jid = await asubmit_to(cluster3, {"script": app, "spark-mode": "connect"})
    job = await _ended(cluster3, jid)
    assert job["state"] == "FAILED"
    s, exc = await ahttp("GET", cluster3.url(2) + f"/jobs/{jid}/exceptions")
    assert s == 200 and exc["root-exception"] == expect, exc


async def test_sys_exit_zero_finishes(cluster3, tmp_path):
    app = _script(tmp_path, "quits.py", "import sys\nsys.exit(0)\nraise SystemExit(5)\n")
    jid = await asubmit_to(cluster3, {"script": app, "spark-mode": "connect"})
    assert (await _ended(cluster3, jid))["state"] == "FINISHED"


async def test_zip_application_uploaded_as_artifact(cluster3, tmp_path):
    out = tmp_path / "zip-out.txt"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("__main__.py", "import sys\nfrom pkg.work import run\nrun(sys.argv)\n")
        z.writestr("pkg/__init__.py", "")
        z.writestr("pkg/work.py", f"def run(argv):\n    open({str(out)!r}, 'w')"
                                  ".write(' '.join(argv))\n")
    payload, ctype = multipart("app.zip", buf.getvalue())
    s, art = await ahttp("POST", cluster3.url(2) + "/artifacts", raw=payload,
                         headers={"Content-Type": ctype})
    assert s == 201, art
    jid = await asubmit_to(cluster3, {"script": art["pyfile"], "argv": ["a", "b"],
                                      "spark-mode": "connect"}, peer=0)
    job = await _ended(cluster3, jid)
    assert job["state"] == "FINISHED", job
    assert out.read_text() == "app.zip a b"


async def test_bad_scripts_are_400_listing_every_problem(cluster3, tmp_path):
    url = cluster3.url(0) + "/jobs"
    s, b = await ahttp("POST", url, {"script": str(tmp_path / "missing.py")})
    assert s == 400 and "is not a file on the peer" in b["errors"][0], b
    bad_zip = tmp_path / "nomain.zip"
    with zipfile.ZipFile(bad_zip, "w") as z:
        z.writestr("app.py", "print(1)\n")
    s, b = await ahttp("POST", url, {"script": str(bad_zip)})
    assert s == 400 and "has no __main__.py" in b["errors"][0], b
    s, b = await ahttp("POST", url, {"script": "artifact:sha256:" + "ab" * 32})
    assert s == 400 and b["errors"] == [
        "script: unknown artifact artifact:sha256:" + "ab" * 32 + "; upload it with POST "
        "/artifacts first"], b
    s, b = await ahttp("POST", url, {"script": "/x.py", "entry": "m:f", "argv": "a",
                                     "spark-mode": "local",
                                     "spark-conf": {"spark.master": "local", "x": 1}})
    assert s == 400 and len(b["errors"]) == 5, b
    s, jobs = await ahttp("GET", cluster3.url(1) + "/jobs")
    assert jobs["jobs"] == []  # nothing was accepted


async def test_what_an_attempt_leaves_in_its_group_is_killed(cluster3, tmp_path):
    """A script whose child (a stand-in for its driver JVM) outlives it: the zygote kills
    the attempt's process group before it reaps the job process."""
    pidfile = tmp_path / "child.pid"
    app = _script(tmp_path, "leaves_child.py", f"""
        import subprocess
        p = subprocess.Popen(["sleep", "300"])
        open({str(pidfile)!r}, "w").write(str(p.pid))
        """)
    jid = await asubmit_to(cluster3, {"script": app, "spark-mode": "connect"})
    assert (await _ended(cluster3, jid))["state"] == "FINISHED"
    child = int(pidfile.read_text())
    await apoll(lambda: not _alive(child), 10, what=f"the attempt's child {child} killed")


async def test_driver_child_dies_with_its_job_process(cluster3, tmp_path):
    """The driver JVM is started through pyspark's gateway launch with a parent-death
    signal: even a child that left the group (setsid) dies when the job process is
    SIGKILLed."""
    pidfile = tmp_path / "jvm.pid"
    app = _script(tmp_path, "killed_driver.py", f"""
        import os, signal
        from jm.runtime.sparkapp import _fence_gateway_launch
        _fence_gateway_launch()
        from pyspark import java_gateway
        p = java_gateway.Popen(["sleep", "300"], preexec_fn=os.setsid)
        open({str(pidfile)!r}, "w").write(str(p.pid))
        os.kill(os.getpid(), signal.SIGKILL)
        """)
    jid = await asubmit_to(cluster3, {"script": app, "spark-mode": "connect"})
    job = await _ended(cluster3, jid)
    assert job["state"] == "FAILED"
    child = int(pidfile.read_text())
    await apoll(lambda: not _alive(child), 10, what=f"the driver stand-in {child} killed")
    s, exc = await ahttp("GET", cluster3.url(0) + f"/jobs/{jid}/exceptions")
    assert "signal SIGKILL" in exc["root-exception"]


async def test_a_driver_that_cannot_start_fails_with_the_jvms_own_error(cluster3, tmp_path):
    app = _script(tmp_path, "never_starts.py", "raise AssertionError('not reached')\n")
    jid = await asubmit_to(cluster3, {"script": app, "spark-conf": {
        "spark.driver.memory": "1x"}})
    job = await _ended(cluster3, jid, timeout=120)
    assert job["state"] == "FAILED"
    s, exc = await ahttp("GET", cluster3.url(1) + f"/jobs/{jid}/exceptions")
    root = exc["root-exception"]
    assert root.startswith("DriverStartError: the Spark driver did not start"), root
    assert "Invalid maximum heap size: -Xmx1x" in root, root


async def test_connect_jobs_say_when_their_peers_server_waits_for_executors(cluster3):
    """The JobMaster path of a Connect server without executors (the real server on a
    real Spark cluster is in tests/e2e/test_connect_standalone.py): the connect-mode jobs
    running on that peer say so while it lasts, classic ones do not, and the exception
    history keeps it."""
    fix = os.path.join(os.path.dirname(__file__), "jobs_fixture.py")
    spec = {"entry": "jobs_fixture:wait_for_stop", "pyfiles": [fix]}
    connect = await asubmit_to(cluster3, spec)
    classic = await asubmit_to(cluster3, dict(spec, **{"spark-mode": "classic"}))

    async def running(jid):
        s, b = await ahttp("GET", cluster3.url(0) + f"/jobs/{jid}")
        return b if b["state"] == "RUNNING" and b["attempts"] else None
    jobs = {jid: await apoll(lambda j=jid: running(j), 60, what=f"{jid} running")
            for jid in (connect, classic)}
    owner = {p.node: p for p in cluster3.peers}

    def live(jid):  # RUNNING is applied before the JobMaster takes its attempt as live:
        # from then on it relays its server's notes (it reads the server's current info
        # itself when it goes live: here there is no server, so wait for that moment)
        m = owner[jobs[jid]["node"]].parts.dispatcher.masters.get(jid)
        return m is not None and m.state.live is not None
    await apoll(lambda: live(connect) and live(classic), 30, what="both attempts live")
    server = {"spark-app-id": "app-1", "master": "spark://m:7077", "executors": 0,
              "shared": "the peer's Spark Connect server"}
    def tell(jid, info):  # each job's own peer hears from its server
        owner[jobs[jid]["node"]].parts.dispatcher.note_engine_info(PEER_ENGINE, info)
    for jid in (connect, classic):
        tell(jid, server)  # nothing to say
    note = "no executor granted by spark://m:7077 for 30 s or more: ..."
    for jid in (connect, classic):
        tell(jid, dict(server, waiting=note))

    async def detail(jid, key):
        s, b = await ahttp("GET", cluster3.url(1) + f"/jobs/{jid}")
        return b if b.get(key) else None
    waiting = await apoll(lambda: detail(connect, "spark-waiting"), 30,
                          what="the connect job's waiting note")
    assert waiting["spark-waiting"] == note and waiting["state"] == "RUNNING"
    assert waiting["attempts"][-1]["spark-app-id"] == "app-1"
    s, ex = await ahttp("GET", cluster3.url(2) + f"/jobs/{connect}/exceptions")
    assert ex["root-exception"] == "SparkResourcesUnavailable: " + note, ex
    s, other = await ahttp("GET", cluster3.url(0) + f"/jobs/{classic}")
    assert "spark-waiting" not in other and "spark-app-id" not in other["attempts"][-1]

    tell(connect, dict(server, executors=1))

    async def cleared():
        b = (await ahttp("GET", cluster3.url(0) + f"/jobs/{connect}"))[1]
        return b if "spark-waiting" not in b else None
    await apoll(cleared, 30, what="the waiting note gone once executors came")
    s, ex = await ahttp("GET", cluster3.url(0) + f"/jobs/{connect}/exceptions")
    assert ex["all-exceptions"][0]["reason"] == "executors granted later", ex
    for jid in (connect, classic):
        await ahttp("PATCH", cluster3.url(0) + f"/jobs/{jid}?mode=cancel")
        assert (await _ended(cluster3, jid))["state"] == "CANCELED"
