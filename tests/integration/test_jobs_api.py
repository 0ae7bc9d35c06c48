"""jm.client.jobs.Jobs, the Python API for orchestrators, through real peers: submit with
a request id (the same id: the same job), wait (and its async form for deferrable
triggers), result, logs, exceptions, cancel, an uploaded script, and its errors."""
import asyncio
import os

import pytest

from jm.client import JobFailed, Jobs
from jm.client.jobs import ApiError, Unreachable
from tests.conftest import running

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"


async def call(fn, *args, **kw):
    """A blocking call of the client (the peers share this test's event loop)."""
    return await asyncio.to_thread(fn, *args, **kw)


async def test_a_pipeline_driven_from_python(tmp_path):
    async with running(str(tmp_path / "c"), 2, {"rest.auth.token": "t0"}) as c:
        jobs = Jobs(",".join(c.urls), token="t0", timeout=20)
        spec = {"entry": "jobs_fixture:quick", "pyfiles": [FIX], "args": {"day": "mon"}}
        jid = await call(jobs.submit, spec, request_id="etl-mon")
        assert await call(jobs.submit, spec, request_id="etl-mon") == jid  # (a retry)
        final = await call(jobs.wait, jid, timeout=60, poll=0.1)
        assert final["state"] == "FINISHED"
        result = await call(jobs.result, jid)
        assert result["job"] == jid and result["args"] == {"day": "mon"}
        assert (await call(jobs.status, jid))["state"] == "FINISHED"

        # a failure: JobFailed with its line; the traceback in its exceptions and log
        bad = await call(jobs.submit, {"entry": "jobs_fixture:boom", "pyfiles": [FIX],
                                       "restart-strategy": {"type": "none"}})
        with pytest.raises(JobFailed) as failed:
            await jobs.wait_async(bad, timeout=60, poll=0.1)
        assert failed.value.job["state"] == "FAILED"
        assert "boom from user code" in failed.value.failure, failed.value.failure
        with pytest.raises(JobFailed):
            await call(jobs.result, bad)
        assert "boom from user code" in await call(jobs.logs, bad)
        ended = await call(jobs.wait, bad, 5, 0.1, None)  # (expect None: any end)
        assert ended["state"] == "FAILED"

        # a long one: a wait that runs out, no result yet, then a cancel
        slow = await call(jobs.submit, {"entry": "jobs_fixture:wait_for_stop",
                                        "pyfiles": [FIX]})
        with pytest.raises(TimeoutError, match="still"):
            await jobs.wait_async(slow, timeout=0.3, poll=0.1)
        with pytest.raises(ApiError) as running_yet:
            await call(jobs.result, slow)
        assert running_yet.value.status == 409
        state = await call(jobs.cancel, slow)
        assert state in ("CANCELLING", "CANCELED"), state
        with pytest.raises(JobFailed):
            await jobs.wait_async(slow, timeout=60, poll=0.1)
        assert await call(jobs.cancel, slow) == "CANCELED"  # (ended: no error)

        # a script uploaded from this machine
        script = tmp_path / "hello.py"
        script.write_text("print('hello from a script')\n")
        ref = await call(jobs.upload, str(script))
        assert ref.startswith("artifact:sha256:")
        sid = await call(jobs.submit, {"script": ref, "spark-mode": "connect"})
        assert (await jobs.wait_async(sid, timeout=60, poll=0.1))["state"] == "FINISHED"
        assert "hello from a script" in await call(jobs.logs, sid)

        # errors: a bad spec, an unknown job, a wrong token, no peer
        with pytest.raises(ApiError) as refused:
            await call(jobs.submit, {"entry": 3})
        assert refused.value.status == 400
        with pytest.raises(ApiError) as unknown:
            await call(jobs.status, "no-such-job")
        assert unknown.value.status == 404
        with pytest.raises(ApiError) as denied:
            await call(Jobs(c.urls[0], token="wrong").status, jid)
        assert denied.value.status == 401
    with pytest.raises(Unreachable):
        await call(Jobs(c.urls[0], token="t0", timeout=1).status, jid)
