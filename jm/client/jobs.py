"""Drive the cluster from Python: submit a job, wait for it, read its logs and result,
cancel it (standard library only, like the rest of the client).

    from jm.client.jobs import Jobs

    jobs = Jobs("http://peer1:8081,http://peer2:8081", token=os.environ["JM_TOKEN"])
    job_id = jobs.submit({"script": jobs.upload("etl.py"), "argv": ["--day", day]},
                         request_id=f"etl-{day}")      # the same id: the same job
    final = jobs.wait(job_id, timeout=3600)            # FINISHED, or JobFailed
    print(jobs.result(job_id), jobs.logs(job_id)[-2000:])

Every request goes to the first peer that answers (a peer down, or a 503 while Raft
elects, moves it to the next one) and is retried within `timeout`. A submission carries
its request id (`X-Request-Id`): sent again, after a lost answer or by an orchestrator's
retry of the task with the same id, it is the same job, not a second one. `wait_async`
waits without a thread of its own, for an orchestrator's deferrable wait (an Airflow
trigger: examples/airflow_dag.py).

Errors: `ApiError` (the cluster refused: its HTTP status and messages), `Unreachable` (no
peer answered in time), `JobFailed` (the job ended FAILED or CANCELED: its record and
its failure's line), `TimeoutError` (a wait ran out).
"""
from __future__ import annotations

import asyncio
import os
import time
import uuid
from typing import Any, Mapping, Optional

from jm.client.cli_http import (DEFAULT_ADDRESS, DEFAULT_TIMEOUT, ApiError, Client, CliError,
                                Unreachable, masters_addresses, quote_id)
from jm.client.cli_spec import upload
from jm.policy.jobs.vocab import TERMINAL

__all__ = ["Jobs", "JobFailed", "ApiError", "Unreachable"]


class JobFailed(CliError):
    """The job ended without finishing: `job` is its record, `failure` its error's line."""

    def __init__(self, job: Mapping[str, Any], failure: Optional[str]) -> None:
        self.job, self.failure = dict(job), failure
        super().__init__(f"job {job.get('jid')} ended {job.get('state')}"
                         + (f": {failure}" if failure else ""))


class Jobs:
    def __init__(self, address: Optional[str] = None, token: Optional[str] = None,
                 ca_file: Optional[str] = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        """`address`: peers' REST URLs, comma-separated (default: $JM_ADDRESS, else the
        peers of $JM_CONF_DIR/masters, else http://127.0.0.1:8081); `token`: the bearer
        (default: $JM_TOKEN); `ca_file`: the CA of peers with a private one."""
        address = address or os.environ.get("JM_ADDRESS") or masters_addresses() \
            or DEFAULT_ADDRESS
        self.client = Client(address, timeout, token or os.environ.get("JM_TOKEN") or None,
                             ca_file)

    # ---- writes -------------------------------------------------------------------------
    def upload(self, path: str) -> str:
        """A local .py, .zip or .egg file as an artifact: the reference a spec's `script`
        or `pyfiles` takes (`artifact:sha256:...`)."""
        return upload(self.client, path)["pyfile"]

    def submit(self, spec: Mapping[str, Any], request_id: Optional[str] = None) -> str:
        """The job id of `spec` (the REST job spec: docs/guide/jobs.md). `request_id`
        makes the submission idempotent: the same id gives the same job, however often
        it is sent (default: a new one, still safe against this call's own retries)."""
        res = self.client.request("POST", "/jobs", dict(spec), headers={
            "X-Request-Id": request_id or uuid.uuid4().hex})
        if not isinstance(res, dict) or not res.get("jobid"):
            raise CliError(f"unexpected answer to the submission: {res!r:.200}")
        return res["jobid"]

    def cancel(self, job_id: str) -> str:
        """Cancel the job; its state after the request (a job that ended is left as it
        is: no error)."""
        try:
            self.client.request("PATCH", f"/jobs/{quote_id(job_id)}?mode=cancel")
        except ApiError as exc:
            if exc.status != 409:  # (409: it ended already)
                raise
        return self.status(job_id)["state"]

    # ---- reads --------------------------------------------------------------------------
    def status(self, job_id: str) -> dict:
        """The job's record: `state`, `node`, `attempt`, `restarts`, `duration`, ..."""
        return self.client.get(f"/jobs/{quote_id(job_id)}")

    def result(self, job_id: str) -> Any:
        """What the job returned (a FINISHED job; JobFailed for one that failed or was
        cancelled, ApiError 409 for one still running)."""
        res = self.client.get(f"/jobs/{quote_id(job_id)}/result")
        state = res.get("state")
        if state == "FINISHED":
            return res.get("result")
        if state in TERMINAL:
            raise JobFailed(self.status(job_id), res.get("failure"))
        raise ApiError(409, [f"job {job_id} is {state}: it has no result yet"])

    def logs(self, job_id: str, attempt: Optional[int] = None) -> str:
        """An attempt's log (default: the latest attempt's), whichever peer ran it."""
        query = "?offset=0" + (f"&attempt={attempt}" if attempt is not None else "")
        return self.client.get(f"/jobs/{quote_id(job_id)}/logs{query}").get("text", "")

    def exceptions(self, job_id: str) -> dict:
        """Its failures, as Flink's /jobs/{id}/exceptions (`root-exception`,
        `all-exceptions` with each attempt's traceback)."""
        return self.client.get(f"/jobs/{quote_id(job_id)}/exceptions")

    # ---- waits --------------------------------------------------------------------------
    def wait(self, job_id: str, timeout: Optional[float] = None, poll: float = 1.0,
             expect: str = "FINISHED") -> dict:
        """Until the job ends: its final record; JobFailed if it ended other than
        `expect` (None: any end is returned); TimeoutError after `timeout` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            job = self.status(job_id)
            if job.get("state") in TERMINAL:
                return self._ended(job, expect)
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} is still {job.get('state')} after "
                                   f"{timeout:.0f} s")
            time.sleep(poll)

    async def wait_async(self, job_id: str, timeout: Optional[float] = None,
                         poll: float = 1.0, expect: str = "FINISHED") -> dict:
        """`wait` on an asyncio loop (each request in the loop's default executor, the
        pause an asyncio sleep): an orchestrator's trigger waits without holding a
        worker."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            job = await asyncio.to_thread(self.status, job_id)
            if job.get("state") in TERMINAL:
                return await asyncio.to_thread(self._ended, job, expect)
            if deadline is not None and loop.time() >= deadline:
                raise TimeoutError(f"job {job_id} is still {job.get('state')} after "
                                   f"{timeout:.0f} s")
            await asyncio.sleep(poll)

    def _ended(self, job: dict, expect: Optional[str]) -> dict:
        if expect is None or job.get("state") == expect:
            return job
        failure = None
        if job.get("state") == "FAILED":
            root = self.exceptions(job["jid"]).get("root-exception")
            failure = str(root).splitlines()[0] if root else None
        raise JobFailed(job, failure)
