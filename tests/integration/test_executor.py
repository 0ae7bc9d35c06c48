"""The warm executor (zygote) through real processes: spawn, exit codes, lease fencing."""
import asyncio
import os
import time

from jm.policy.jobs.runparams import RunParams
from jm.runtime.executor import Executor, ProcessExit, Refused
from tests.helpers import apoll, spawned

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"


def _params(tmp_path, job, entry, args=None) -> RunParams:
    return RunParams(job_id=job, attempt=1, node="n1", entry=entry, sql=None,
                     args=args or {}, pyfiles=(FIX,), log_path=str(tmp_path / f"{job}.log"),
                     result_path=str(tmp_path / f"{job}.result.json"),
                     error_path=str(tmp_path / f"{job}.error.json"),
                     checkpoint_dir=str(tmp_path / "cp"))


async def test_spawn_runs_job_and_reports_exit(tmp_path):
    ex = Executor(str(tmp_path / "log"), preload="none")
    await ex.start()
    try:
        jp = await spawned(ex, _params(tmp_path, "a", "jobs_fixture:quick"))
        assert jp.pid > 0
        assert await asyncio.wait_for(jp.exited, 30) == ProcessExit(0)
        assert (tmp_path / "a.result.json").exists()
        jp = await spawned(ex, _params(tmp_path, "b", "jobs_fixture:boom"))
        assert (await asyncio.wait_for(jp.exited, 30)).code == 1
        assert "boom from user code" in (tmp_path / "b.error.json").read_text()
        assert "Traceback" in (tmp_path / "b.log").read_text()
    finally:
        await ex.close()


async def test_expired_lease_kills_job_processes_even_if_peer_is_silent(tmp_path):
    ex = Executor(str(tmp_path / "log"), preload="none")
    await ex.start()
    try:
        ex.set_lease(time.monotonic() + 60)
        jp = await spawned(ex, _params(tmp_path, "s", "jobs_fixture:sleepy", {"seconds": 120}))
        assert os.path.exists(f"/proc/{jp.pid}")
        t0 = time.monotonic()
        ex.set_lease(t0 + 0.3)  # the peer renews no more: as if it were frozen
        ended = await asyncio.wait_for(jp.exited, 10)
        assert ended.fenced and ended.signal == 9, ended
        assert time.monotonic() - t0 < 2.0
        # while the lease is expired nothing new starts
        refused = await ex.spawn(_params(tmp_path, "t", "jobs_fixture:quick"))
        assert isinstance(refused, Refused) and refused.exit.fenced, refused
        assert not (tmp_path / "t.result.json").exists()
        ex.set_lease(time.monotonic() + 60)  # renewed: runs again
        jp3 = await spawned(ex, _params(tmp_path, "u", "jobs_fixture:quick"))
        assert await asyncio.wait_for(jp3.exited, 30) == ProcessExit(0)
    finally:
        await ex.close()


async def test_zygote_death_kills_its_jobs_and_is_replaced(tmp_path):
    ex = Executor(str(tmp_path / "log"), preload="none")
    await ex.start()
    try:
        jp = await spawned(ex, _params(tmp_path, "s", "jobs_fixture:sleepy", {"seconds": 120}))
        old = ex.zygote_pid
        os.kill(old, 9)
        await asyncio.wait_for(jp.exited, 10)
        await apoll(lambda: not os.path.exists(f"/proc/{jp.pid}")
                    or open(f"/proc/{jp.pid}/stat").read().split()[2] == "Z", 5,
                    what="job process gone with its zygote")
        await apoll(lambda: ex.zygote_pid not in (None, old), 30, what="new zygote")
        jp2 = await spawned(ex, _params(tmp_path, "q", "jobs_fixture:quick"))
        assert await asyncio.wait_for(jp2.exited, 30) == ProcessExit(0)
    finally:
        await ex.close()


async def test_fenced_zygote_sleeps_instead_of_spinning(tmp_path):
    """With its lease run out (a frozen or cut-off peer), the zygote has nothing to do
    until the peer speaks again: its CPU time stays near zero."""
    import psutil
    ex = Executor(str(tmp_path / "log"), preload="none")
    await ex.start()
    try:
        ex.set_lease(time.monotonic() + 60)
        jp = await spawned(ex, _params(tmp_path, "s", "jobs_fixture:sleepy", {"seconds": 120}))
        ex.set_lease(time.monotonic() - 1.0)  # expired
        assert (await asyncio.wait_for(jp.exited, 10)).fenced is True
        zygote = psutil.Process(ex.zygote_pid)
        before = zygote.cpu_times()
        t0 = time.monotonic()
        await asyncio.sleep(5.0)  # the window over which CPU use is measured
        after = zygote.cpu_times()
        used = (after.user + after.system) - (before.user + before.system)
        assert used < 0.25, f"fenced zygote used {used:.2f} s of CPU in {time.monotonic() - t0:.1f} s"
        # and it still answers: renewed, it runs jobs again
        ex.set_lease(time.monotonic() + 60)
        jp2 = await spawned(ex, _params(tmp_path, "q", "jobs_fixture:quick"))
        assert await asyncio.wait_for(jp2.exited, 30) == ProcessExit(0)
    finally:
        await ex.close()
