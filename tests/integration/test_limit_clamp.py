"""A configured limit above the hard limit the peer has (root in a container cannot raise
it): every job gets the hard limit silently, and the peer's log says so once, when its
job executor starts. Through a real peer (in-process), its zygote and job processes."""
import logging
import resource

import pytest

from tests.conftest import running
from tests.helpers import ahttp
from tests.integration.test_job_isolation import _run_job

KEY = "jobmanager.executor.limits.open-files"


async def _run(c, entry: str) -> tuple[dict, str]:
    """Run `entry` to its end (test_job_isolation's helper): (the job, its log)."""
    job = await _run_job(c, entry)
    jid = job["jid"]
    s, b = await ahttp("GET", c.url(0) + f"/jobs/{jid}/logs")
    assert s == 200 and f"[jm] job {jid}" in b["text"], b
    return job, b["text"]


async def test_open_files_above_the_hard_limit_is_clamped_and_warned_once(tmp_path, caplog):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit on open files here")
    wanted = hard + 1000
    caplog.set_level(logging.INFO, logger="jm.runtime.executor")
    async with running(str(tmp_path), 1, {KEY: wanted}) as c:
        for _ in range(2):
            job, log = await _run(c, "isolation_jobs:whoami")
            assert job["state"] == "FINISHED", job
            assert "could not set resource limit" not in log, log
            nofile = job["result"]["nofile"]
            # the hard limit, or what is asked when the peer may raise it (not in a container)
            assert nofile in ([hard, hard], [wanted, wanted]), nofile
    warnings = [r.getMessage() for r in caplog.records
                if r.name == "jm.runtime.executor" and KEY in r.getMessage()]
    if nofile == [wanted, wanted]:  # this peer could raise it: nothing to warn about
        assert warnings == []
        return
    assert len(warnings) == 1, warnings
    assert f"{KEY} is {wanted}, above the hard limit {hard}" in warnings[0]
    assert f"jobs get {hard}" in warnings[0]
    assert [r.levelname for r in caplog.records if KEY in r.getMessage()] == ["WARNING"]
