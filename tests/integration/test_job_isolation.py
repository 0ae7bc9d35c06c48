"""Jobs cannot hurt the control plane: limits, another user, and no job without its fence.

Through the real Executor, zygote and job processes (and, last, real peers in-process).
The machine's tests run as root, so `jobmanager.executor.user=nobody` is tried for real;
without root those tests are skipped."""
import asyncio
import json
import os
import signal
import sys
import time

import pytest

from jm.policy.jobs.runparams import RunParams, fence_interval
from jm.runtime.executor import Executor, ExecutorConfigError, ProcessExit
from jm.runtime.limits import JobLimits, proc_state
from tests.helpers import ahttp, apoll, spawned

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run jobs as nobody")


def _reachable_by_others(path: str) -> bool:
    p = os.path.realpath(path)
    while p != "/":
        if not os.stat(p).st_mode & 0o001:
            return False
        p = os.path.dirname(p)
    return True


# a Spark job imports modules the zygote did not load: the job's user must read Python
python_readable = pytest.mark.skipif(
    not all(_reachable_by_others(p) for p in (sys.executable, os.path.dirname(os.__file__))),
    reason="this Python installation is not readable by other users (e.g. under /root)")


def _open_up(path) -> None:
    """pytest's temporary directories are 0700: let the job's user reach its run dir."""
    p = os.path.abspath(str(path))
    while p not in ("/", "/tmp"):
        os.chmod(p, os.stat(p).st_mode | 0o755)
        p = os.path.dirname(p)


LEASE = 1.0  # seconds: the leases the zygote tests below end after


def _params(tmp_path, job, entry, args=None):
    run = tmp_path / "runs" / job
    run.mkdir(parents=True, exist_ok=True)  # (the JobMaster makes it)
    return RunParams(job_id=job, attempt=1, node="n1", entry=entry, sql=None,
                     args=args or {}, pyfiles=(FIX,), log_path=str(tmp_path / f"{job}.log"),
                     result_path=str(run / "result.json"), error_path=str(run / "error.json"),
                     checkpoint_dir=str(tmp_path / "cp" / job),
                     fence_interval=fence_interval(LEASE))


def _result(tmp_path, job):
    return json.loads((tmp_path / "runs" / job / "result.json").read_text())["result"]


def _error(tmp_path, job):
    return (tmp_path / "runs" / job / "error.json").read_text()


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return proc_state(f.read())
    except OSError:
        return ""


async def _run_job(c, entry: str, timeout: float = 60) -> dict:
    """Submit `entry` (no restarts) to the first peer and wait until it ends."""
    s, b = await ahttp("POST", c.url(0) + "/jobs",
                       {"entry": entry, "pyfiles": [FIX], "restart-strategy": {"type": "none"}})
    assert s == 202, b
    jid = b["jobid"]

    async def ended():
        s, b = await ahttp("GET", c.url(0) + f"/jobs/{jid}")
        return b if s == 200 and b["state"] in ("FINISHED", "FAILED") else None
    return await apoll(ended, timeout, what=f"job {entry} ended")


async def _executor(tmp_path, **limits) -> Executor:
    ex = Executor(str(tmp_path / "log"), preload="none", limits=JobLimits(**limits))
    await ex.start()
    return ex


@root_only
async def test_job_runs_as_the_configured_user_with_its_limits(tmp_path):
    _open_up(tmp_path)
    ex = await _executor(tmp_path, user="nobody", nproc=64, open_files=1000,
                         file_size=2 ** 20, oom_score_adj=700)
    try:
        jp = await spawned(ex, _params(tmp_path, "w", "isolation_jobs:whoami"))
        assert await asyncio.wait_for(jp.exited, 30) == ProcessExit(0), _error(tmp_path, "w")
        r = _result(tmp_path, "w")
        assert r["uid"] == 65534 and r["gid"] != 0
        assert r["nofile"] == [1000, 1000]
        assert r["fsize"] == [2 ** 20, 2 ** 20]
        assert r["nproc"][0] == r["nproc"][1] and 64 <= r["nproc"][0] < 10000
        assert r["oom_score_adj"] == 700
        assert r["pgid"] == jp.pid  # a process group of its own
        # the zygote has a process group of its own (a stop of the peer's group misses
        # it) in the peer's session (one CPU scheduling group with the peer: autogroup)
        assert os.getpgid(ex.zygote_pid) == ex.zygote_pid != os.getpgid(0)
        assert os.getsid(ex.zygote_pid) == os.getsid(0)
    finally:
        await ex.close()


async def test_unknown_user_is_a_clear_start_up_error(tmp_path):
    with pytest.raises(ExecutorConfigError, match="jobmanager.executor.user"):
        Executor(str(tmp_path / "log"), preload="none",
                 limits=JobLimits(user="no-such-user-jm-test"))


SECRETS = {"JM_CONF_JOBMANAGER_WEIGHT": "1", "JM_PROPERTIES": "jobmanager.slots: 8",
           "AWS_SECRET_ACCESS_KEY": "peer-only", "GOOGLE_APPLICATION_CREDENTIALS": "/k.json"}


async def test_jobs_see_an_allow_listed_environment_without_the_peers_secrets(
        tmp_path, monkeypatch):
    """The peer's configuration variables and cloud credentials stay with the peer (a
    container gets rest.auth.token and cluster.secret as JM_CONF_*); variables named by
    jobmanager.executor.env-pass reach the job, and JM_CONF_* never does."""
    from tests.conftest import running
    for k, v in dict(SECRETS, MY_PIPELINE_SETTING="on", OTHER_SETTING="x").items():
        monkeypatch.setenv(k, v)
    async with running(str(tmp_path), 1, {"jobmanager.executor.env-pass": "MY_*, JM_CONF_*"}
                       ) as c:
        job = await _run_job(c, "isolation_jobs:environment", 60)
        assert job["state"] == "FINISHED", job
        names = set(job["result"])
        assert not names & set(SECRETS), names & set(SECRETS)
        assert "OTHER_SETTING" not in names and not any(n.startswith("JM_CONF_") for n in names)
        assert {"MY_PIPELINE_SETTING", "PATH", "JM_JOB_ID"} <= names


@root_only
async def test_a_job_over_its_process_limit_fails_and_the_executor_lives(tmp_path):
    _open_up(tmp_path)
    ex = await _executor(tmp_path, user="nobody", nproc=30)
    try:
        jp = await spawned(ex, _params(tmp_path, "b", "isolation_jobs:many_threads",
                                       {"max": 400}))
        ended = await asyncio.wait_for(jp.exited, 60)
        assert (ended.code, ended.fenced) == (1, False), ended
        assert "can't start new thread" in _error(tmp_path, "b")
        jp = await spawned(ex, _params(tmp_path, "q", "jobs_fixture:quick"))
        assert await asyncio.wait_for(jp.exited, 30) == ProcessExit(0)
    finally:
        await ex.close()


async def test_a_job_writing_past_the_file_size_limit_fails_cleanly(tmp_path):
    ex = await _executor(tmp_path, file_size=256 * 1024)
    try:
        out = tmp_path / "big.bin"
        jp = await spawned(ex, _params(tmp_path, "f", "isolation_jobs:big_file",
                                       {"path": str(out), "chunks": 16}))
        ended = await asyncio.wait_for(jp.exited, 30)
        assert (ended.code, ended.signal) == (1, 0), ended
        assert "File too large" in _error(tmp_path, "f")
        assert out.stat().st_size == 256 * 1024
        jp = await spawned(ex, _params(tmp_path, "q", "jobs_fixture:quick"))
        assert await asyncio.wait_for(jp.exited, 30) == ProcessExit(0)
    finally:
        await ex.close()


async def _ticking(ex, tmp_path, job):
    path = tmp_path / f"{job}.ticks"
    jp = await spawned(ex, _params(tmp_path, job, "isolation_jobs:ticks",
                                   {"path": str(path), "seconds": 120}))
    await apoll(lambda: path.exists() and path.stat().st_size > 0, 30, what="job ticking")
    return jp, path


async def test_a_stopped_zygote_stops_its_jobs_and_continues_them(tmp_path):
    ex = await _executor(tmp_path)
    try:
        ex.set_lease(time.monotonic() + 60)
        jp, path = await _ticking(ex, tmp_path, "t")
        z = ex.zygote_pid
        os.kill(z, signal.SIGSTOP)
        try:
            await apoll(lambda: _state(jp.pid) == "T", 10, what="job stopped with its zygote")
            size = path.stat().st_size
        finally:
            os.kill(z, signal.SIGCONT)
        await apoll(lambda: path.stat().st_size > size, 10, what="job ticking again")
        assert _state(jp.pid) != "T" and not jp.exited.done()
        ex.kill(jp)
        assert (await asyncio.wait_for(jp.exited, 10)).signal == 9
    finally:
        await ex.close()


async def test_a_lease_renewed_while_the_zygote_was_stopped_keeps_its_jobs(tmp_path):
    """The zygote reads the renewals the peer sent meanwhile before it judges the lease."""
    ex = await _executor(tmp_path)
    try:
        ex.set_lease(time.monotonic() + 60)
        jp, path = await _ticking(ex, tmp_path, "r")
        z = ex.zygote_pid
        end = time.monotonic() + LEASE
        ex.set_lease(end)
        await asyncio.sleep(0)  # (lets the write reach the pipe)
        os.kill(z, signal.SIGSTOP)
        try:
            await apoll(lambda: _state(jp.pid) == "T", 10, what="job stopped with its zygote")
            ex.set_lease(time.monotonic() + 60)  # the peer renews: queued in the pipe
            await apoll(lambda: time.monotonic() > end + 0.2, 10, what="old lease over")
        finally:
            os.kill(z, signal.SIGCONT)
        size = path.stat().st_size
        await apoll(lambda: path.stat().st_size > size, 10, what="job ticking again")
        assert not jp.exited.done()
        ex.kill(jp)
        await asyncio.wait_for(jp.exited, 10)
    finally:
        await ex.close()


async def test_a_lease_that_ran_out_while_the_zygote_was_stopped_kills_its_jobs(tmp_path):
    ex = await _executor(tmp_path)
    try:
        ex.set_lease(time.monotonic() + 60)
        jp, path = await _ticking(ex, tmp_path, "k")
        z = ex.zygote_pid
        end = time.monotonic() + LEASE
        ex.set_lease(end)  # and then nothing: the peer is cut off
        await asyncio.sleep(0)
        os.kill(z, signal.SIGSTOP)
        try:
            await apoll(lambda: _state(jp.pid) == "T", 10, what="job stopped with its zygote")
            await apoll(lambda: time.monotonic() > end + 0.2, 10, what="lease over")
            stopped_size = path.stat().st_size
        finally:
            os.kill(z, signal.SIGCONT)
        ended = await asyncio.wait_for(jp.exited, 10)
        assert ended.fenced and ended.signal == 9, ended
        # it never ran again: the last tick is from before the stop
        assert path.stat().st_size == stopped_size
        last = float(path.read_text().split()[-1])
        assert last < end
    finally:
        await ex.close()


@root_only
async def test_kill_minus_one_from_a_job_running_as_nobody_leaves_the_peers_alive(tmp_path):
    from tests.conftest import running
    _open_up(tmp_path)
    async with running(str(tmp_path), 1, {"jobmanager.executor.user": "nobody",
                                          "jobmanager.executor.preload": "none"}) as c:
        zygote = c.peers[0].ground.executor.zygote_pid
        job = await _run_job(c, "isolation_jobs:kill_everyone", 60)
        assert job["state"] == "FINISHED", job
        assert job["result"] == "still here"
        assert os.path.exists(f"/proc/{zygote}") and _state(zygote) not in ("Z", "")
        job = await _run_job(c, "jobs_fixture:quick", 60)
        assert job["state"] == "FINISHED", job


@root_only
async def test_a_job_of_another_user_cannot_read_the_peer_s_journal_or_audit_log(tmp_path):
    """The Raft journal and snapshot (every tenant's specs, SQL and code), the identity and
    the audit log are the peer's alone, while the job reaches its own run dir."""
    from tests.conftest import running
    _open_up(tmp_path)
    async with running(str(tmp_path), 1, {"jobmanager.executor.user": "nobody",
                                          "jobmanager.executor.preload": "none",
                                          "rest.auth.token": "root-token"}) as c:
        headers = {"Authorization": "Bearer root-token"}
        s, b = await ahttp("POST", c.url(0) + "/tokens", {"name": "x", "role": "read"},
                           headers=headers)  # (an audit entry)
        assert s == 201, b
        peer = c.peers[0]
        audit = os.path.join(peer.ground.log_dir, "audit.log")
        journal = os.path.join(peer.ground.raft_dir, "raft.journal")
        assert os.path.exists(audit) and os.path.exists(journal)
        assert os.stat(peer.ground.raft_dir).st_mode & 0o777 == 0o700
        assert os.stat(audit).st_mode & 0o777 == 0o600
        s, b = await ahttp("POST", c.url(0) + "/jobs", {
            "entry": "isolation_jobs:peer_files", "pyfiles": [FIX],
            "args": {"paths": [audit, journal]}, "restart-strategy": {"type": "none"}},
            headers=headers)
        assert s == 202, b
        jid = b["jobid"]

        async def ended():
            s, b = await ahttp("GET", c.url(0) + f"/jobs/{jid}", headers=headers)
            return b if s == 200 and b["state"] in ("FINISHED", "FAILED") else None
        job = await apoll(ended, 60, what="the job ended")
        assert job["state"] == "FINISHED", job
        assert job["result"] == {audit: "PermissionError", journal: "PermissionError"}, job


@pytest.mark.slow
def test_a_stop_of_the_peers_process_group_stops_its_jobs_and_the_lease_still_fences(tmp_path):
    """Ctrl-Z on `bin/jobmanager.sh start-foreground` stops the peer's process group. The
    zygote is not in it (its own process group): the job stops with its peer, goes on when the
    peer does, and is killed by the zygote when the lease runs out while the peer is
    stopped."""
    import subprocess
    from tests.helpers import poll
    from tests.integration.isolation_peer import LEASE
    root = os.path.dirname(os.path.dirname(FIX.rstrip("/")))
    peer = subprocess.Popen([sys.executable, "-m", "tests.integration.isolation_peer",
                             str(tmp_path)], cwd=root, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    job = zygote = None
    try:
        zygote, job = map(int, peer.stdout.readline().split())
        ticks = tmp_path / "ticks"
        poll(lambda: ticks.exists() and ticks.stat().st_size > 0, 30, what="job ticking")
        assert os.getpgid(zygote) != os.getpgid(peer.pid)
        os.killpg(peer.pid, signal.SIGSTOP)
        try:
            poll(lambda: _state(job) == "T", 10, what="job stopped with its peer")
            assert _state(zygote) != "T"
        finally:
            os.killpg(peer.pid, signal.SIGCONT)
        size = ticks.stat().st_size
        poll(lambda: ticks.stat().st_size > size, 10, what="job ticking again")
        os.killpg(peer.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        try:
            poll(lambda: _state(job) in ("", "Z"), LEASE + 10, what="job killed by the fence")
            assert time.monotonic() - t0 < LEASE + 5
            assert _state(zygote) not in ("", "Z", "T")
        finally:
            os.killpg(peer.pid, signal.SIGCONT)
        peer.stdin.close()
        peer.wait(30)
    finally:
        for pid in (job, zygote, peer.pid):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        peer.wait(10)


@root_only
@python_readable
@pytest.mark.slow
async def test_a_spark_connect_job_runs_as_nobody_under_the_default_limits(tmp_path,
                                                                           monkeypatch):
    """The defaults (and another user) do not break a PySpark Connect client job; the
    Connect server (it runs users' SQL and UDFs) has none of the peer's secrets."""
    from tests.conftest import running
    _open_up(tmp_path)
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    async with running(str(tmp_path), 1, {"jobmanager.executor.user": "nobody",
                                          "spark.driver.memory": "512m"}, spark=True) as c:
        job = await _run_job(c, "isolation_jobs:spark_probe", 240)
        assert job["state"] == "FINISHED", job
        assert job["result"]["count"] == 1000 and job["result"]["uid"] == 65534
        with open(f"/proc/{c.peers[0].ground.sparks.server.proc.pid}/environ", "rb") as f:
            names = {v.split(b"=", 1)[0].decode() for v in f.read().split(b"\0") if v}
        assert "SPARK_HOME" in names and not names & set(SECRETS), names & set(SECRETS)
        print("spark connect job:", job["result"])
        await _livy_code_runs_as_the_executor_user(c)


async def _livy_code_runs_as_the_executor_user(c):
    """A Livy pyspark session's code (no proxyUser) runs as jobmanager.executor.user under
    the job processes' limits: it cannot read the peer's journal."""
    journal = os.path.join(c.peers[0].ground.raft_dir, "raft.journal")
    s, b = await ahttp("POST", c.url(0) + "/sessions", {"kind": "pyspark"})
    assert s == 201, b
    n = b["id"]
    code = ("import os\n"
            "try:\n    open(%r, 'rb').read(1); seen = 'read'\n"
            "except OSError as e:\n    seen = type(e).__name__\n"
            "print(os.getuid(), seen, open('/proc/self/oom_score_adj').read().strip(),\n"
            "      spark.range(3).count())" % journal)
    s, b = await ahttp("POST", c.url(0) + f"/sessions/{n}/statements", {"code": code})
    assert s == 201, b

    async def done():
        s, b = await ahttp("GET", c.url(0) + f"/sessions/{n}/statements/0")
        return b if b["state"] in ("available", "error") else None
    st = await apoll(done, 120, what="the Livy statement")
    out = st["output"]
    assert out["status"] == "ok", out
    uid, seen, adj, count = out["data"]["text/plain"].split()
    want = c.peers[0].conf["jobmanager.executor.limits.oom-score-adj"]  # (500: first to go)
    assert (int(uid), seen, int(adj), int(count)) == (65534, "PermissionError", want, 3), out
    await ahttp("DELETE", c.url(0) + f"/sessions/{n}")
