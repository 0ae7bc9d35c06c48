"""SQL jobs on the fast path: a connect-mode batch SQL job (`POST /jobs` with `sql`) runs as
a statement in the peer's SQL worker, in a fresh Spark session of its own, instead of in
a forked job process. The contract is the job's: result.json / error.json in its run
directory, a line in its log, cancel and the lease ending it. `SqlJobExecutor` stands in
for the peer's Executor in the JobMasters' environment and sends every other job on."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from typing import Any

from jm.policy.sqlresult import columns
from jm.runtime import sqlproto as P
from jm.runtime.executor import JobProcess


def fast_path(params: dict) -> bool:
    """Whether a job runs as a statement in the SQL worker (pure)."""
    return bool(params.get("sql")) and not params.get("streaming") \
        and params.get("spark_mode", "connect") == "connect" and bool(params.get("spark_remote"))


def job_result(page: dict, max_rows: int) -> dict:
    """A SQL job's result from its first page of at most max_rows + 1 rows (pure)."""
    rows = page.get("rows") or []
    return {"columns": [c["name"] for c in columns(page.get("schema"))],
            "rows": rows[:max_rows], "truncated": len(rows) > max_rows}


class SqlRun(JobProcess):
    """A SQL job's attempt in the SQL worker (what the JobMaster awaits and kills)."""
    task: Any = None
    op: str = ""


class SqlJobExecutor:
    def __init__(self, executor: Any, sql: Any, lease_valid) -> None:
        self.executor = executor
        self.sql = sql            # the peer's SqlGateway (its worker)
        self.lease_valid = lease_valid
        self._closing: set = set()  # session releases under way

    def __getattr__(self, name: str) -> Any:  # running(), set_lease(), ... of the Executor
        return getattr(self.executor, name)

    async def spawn(self, params: dict) -> JobProcess:
        if not fast_path(params):
            return await self.executor.spawn(params)
        loop = asyncio.get_running_loop()
        key = f"{params['job_id']}/{params['attempt']}/sql"
        if not self.lease_valid():  # as the zygote: nothing runs without a lease
            run = SqlRun(key, -1, loop.create_future())
            run.exited.set_result((1, 0, True))
            return run
        worker = self.sql._worker()
        await worker._ensure()
        run = SqlRun(key, worker.proc.pid, loop.create_future())
        run.op = f"{params['session_id']}-job"
        run.task = asyncio.create_task(self._run(worker, params, run))
        return run

    def kill(self, jp: JobProcess, sig: int = signal.SIGKILL) -> None:
        if not isinstance(jp, SqlRun):
            return self.executor.kill(jp, sig)
        if jp.task is not None and not jp.task.done():
            jp.task.cancel()

    async def _run(self, worker: Any, params: dict, run: SqlRun) -> None:
        session, max_rows = params["session_id"], int(params.get("max_result_rows", 1000))
        _log(params, f"[jm] job {params['job_id']} attempt {params['attempt']} on "
                     f"{params['node']}: SQL in the peer's SQL worker (session {session})\n")
        outcome = (0, 0, False)
        try:
            await _spark_ready(params)
            await worker.call(P.OpenSession(session, dict(params.get("spark_conf") or {}), ()))
            page = await worker.call(P.Execute(session, run.op, params["sql"], {},
                                               max_rows + 1))
            value = job_result(page, max_rows)
            text = json.dumps({"result": value})
            limit = int(params.get("max_result_size", 256 * 1024))
            if len(text) > limit + len('{"result": }'):
                raise ValueError(f"the job's result is {len(text)} bytes, more than "
                                 f"jobmanager.result.max-size ({limit} bytes)")
            _write(params["result_path"], text)
        except asyncio.CancelledError:
            await _quietly(worker.call(P.Cancel(run.op), timeout=10))
            outcome = (-signal.SIGTERM, signal.SIGTERM, False)
        except Exception as exc:
            if not self.lease_valid():  # the zygote killed the worker with the lease
                outcome = (1, 0, True)
                return
            message = str(exc) if str(exc) else type(exc).__name__
            _write(params["error_path"], json.dumps({"exception": message, "traceback": ""}))
            _log(params, message + "\n")
            outcome = (1, 0, False)
        finally:
            # the session is released after the attempt has ended (its result is written):
            # the release is not on the job's way to FINISHED
            closing = asyncio.ensure_future(
                _quietly(worker.call(P.CloseSession(session, True), timeout=10)))
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
            _log(params, f"[jm] ended {time.strftime('%H:%M:%S')}\n")
            if not run.exited.done():
                run.exited.set_result(outcome)


async def _spark_ready(params: dict) -> None:
    """As a job process does: wait for the peer's Connect server (a peer just started,
    or restarting its server) up to spark.connect.startup-timeout."""
    ready = params.get("spark_ready_file")
    deadline = time.monotonic() + float(params.get("spark_wait", 180))
    while ready and not os.path.exists(ready):
        if time.monotonic() > deadline:
            raise TimeoutError("the peer's Spark Connect server is not ready after "
                               f"{params.get('spark_wait')} s")
        await asyncio.sleep(0.1)


async def _quietly(aw: Any) -> None:
    try:
        await asyncio.shield(aw)
    except Exception:
        pass


def _write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _log(params: dict, line: str) -> None:
    path = params.get("log_path")
    if path:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as f:
            f.write(line)
