"""SQL jobs on the fast path: a connect-mode batch SQL job (`POST /jobs` with `sql`) runs as
a statement in the peer's SQL worker, in a fresh Spark session of its own, instead of in
a forked job process. The contract is the job's: result.json / error.json in its run
directory, a line in its log, cancel and the lease ending it. `SqlJobExecutor` stands in
for the peer's Executor in the JobMasters' environment and sends every other job on.

A job whose statement only reads (jm/policy/sql/sqlparse.py: SELECT, WITH, SHOW, ...) leaves
nothing in its session, so it runs in a warm session the peer keeps for such jobs (one
per distinct `spark-conf`, a new one after the Spark server restarts or after it idled):
no session to open, no first-statement cost, nothing to release. Any other statement
(SET, USE, temporary views, writes) gets a fresh session of its own, released after it."""
from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import uuid
from collections import OrderedDict
from typing import Any, Optional

from jm.wire.sqlresult import columns
from jm.policy.jobs.runparams import RunParams
from jm.policy.sql.sqlparse import READ, classify
from jm.policy.sql.sparkerror import short
from jm.runtime import sqlproto as P
from jm.runtime.executor import JobProcess, ProcessExit, Refused, SpawnResult, Started
from jm.cluster.spark.sqlworkers import SqlWorkers


def fast_path(params: RunParams) -> bool:
    """Whether a job runs as a statement in the SQL worker (pure)."""
    return bool(params.sql) and not params.streaming \
        and params.spark_mode == "connect" and bool(params.spark_remote)


SHARED_MAX = 8          # warm sessions for read-only jobs (distinct spark-conf), at most
SHARED_IDLE = 600.0     # seconds: a warm session unused this long is replaced (the server
                        # ends idle sessions on its own after an hour by default)


def shared_key(params: RunParams, server: int) -> Optional[tuple]:
    """The warm session a SQL job may run in (pure): its engine (never another tenant's),
    that engine's generation and its spark-conf; None for a statement that could leave
    something in its session."""
    if classify(params.sql or "") != READ:
        return None
    conf = params.spark_conf
    return (params.spark_remote, server) + tuple(sorted((str(k), str(v))
                                                        for k, v in conf.items()))


def job_result(page: dict, max_rows: int) -> dict:
    """A SQL job's result from its first page of at most max_rows + 1 rows (pure)."""
    rows = page.get("rows") or []
    return {"columns": [c["name"] for c in columns(page.get("schema"))],
            "rows": rows[:max_rows], "truncated": len(rows) > max_rows}


class Shared:
    """A warm session read-only jobs share, and how many of them are in it now."""

    def __init__(self, session: str, worker: Any = None) -> None:
        self.id = session
        self.worker = worker  # the SQL worker of its engine
        self.used = 0.0
        self.users = 0
        self.retired = False


class SqlRun(JobProcess):
    """A SQL job's attempt in the SQL worker (what the JobMaster awaits and kills)."""
    task: Any = None
    op: str = ""


class SqlJobExecutor:
    """What the JobMasters run attempts with (spawn and kill): a SQL job that can take
    the fast path runs as a statement in the SQL worker, anything else in a job process
    of the Executor."""

    def __init__(self, executor: Any, workers: SqlWorkers, engines: Any, lease_valid) -> None:
        self.executor = executor
        self.workers = workers    # the SQL workers of the peer's engines
        self.engines = engines
        self.lease_valid = lease_valid
        self._closing: set = set()  # session releases under way
        self._shared: OrderedDict = OrderedDict()  # shared_key -> Shared

    async def spawn(self, params: RunParams) -> SpawnResult:
        if not fast_path(params):
            return await self.executor.spawn(params)
        loop = asyncio.get_running_loop()
        key = f"{params.job_id}/{params.attempt}/sql"
        if not self.lease_valid():  # as the zygote: nothing runs without a lease
            return Refused(ProcessExit(1, 0, True))
        name, generation = self.engines.at(params.spark_remote)
        worker = self.workers.get(params.spark_remote, name,
                                  params.run_as if name != "peer" else None,
                                  params.spark_token,
                                  *((params.memory, params.cpu) if name != "peer" else (0, 0)))
        await worker.ensure()
        run = SqlRun(key, worker.proc.pid, loop.create_future())
        run.op = f"{params.session_id}-job"
        run.task = asyncio.create_task(self._run(worker, params, run, generation))
        return Started(run)

    def kill(self, jp: JobProcess, sig: int = signal.SIGKILL) -> None:
        if not isinstance(jp, SqlRun):
            return self.executor.kill(jp, sig)
        if jp.task is not None and not jp.task.done():
            jp.task.cancel()

    async def _run(self, worker: Any, params: RunParams, run: SqlRun,
                   generation: int) -> None:
        max_rows = params.max_result_rows
        key = shared_key(params, generation)
        sh = self._acquire(worker, key) if key else None
        session = sh.id if sh else params.session_id
        _log(params, f"[jm] job {params.job_id} attempt {params.attempt} on "
                     f"{params.node}: SQL in the peer's SQL worker (session {session}"
                     f"{', shared by read-only jobs' if sh else ''})\n")
        outcome = ProcessExit(0)
        try:
            await _spark_ready(params)
            conf = dict(params.spark_conf)

            async def statement(session: str) -> dict:
                await worker.call(P.OpenSession(session, conf, ()))
                return await worker.call(P.Execute(session, run.op, params.sql, {},
                                                   max_rows + 1))
            try:
                page = await statement(session)
            except Exception as exc:
                if sh is None or "INVALID_HANDLE" not in str(exc):
                    raise
                # the server ended the warm session (it restarted, or expired it): once
                # more in a new one
                self._retire(key, sh)
                self._done_with(sh)
                sh = self._acquire(worker, key)
                session = sh.id
                page = await statement(session)
            value = job_result(page, max_rows)
            text = json.dumps({"result": value})
            limit = params.max_result_size
            if len(text) > limit + len('{"result": }'):
                raise ValueError(f"the job's result is {len(text)} bytes, more than "
                                 f"jobmanager.result.max-size ({limit} bytes)")
            _write(params.result_path, text)
        except asyncio.CancelledError:
            await _quietly(worker.call(P.Cancel(run.op), timeout=10))
            outcome = ProcessExit(-signal.SIGTERM, signal.SIGTERM)
        except Exception as exc:
            if not self.lease_valid():  # the zygote killed the worker with the lease
                outcome = ProcessExit(1, 0, True)
                return
            message = str(exc) if str(exc) else type(exc).__name__
            # one line (Spark's error class and message); the whole text (its "JVM
            # stacktrace") in the traceback and the job's log
            _write(params.error_path, json.dumps({"exception": short(message),
                                                  "traceback": message}))
            _log(params, message + "\n")
            outcome = ProcessExit(1)
        finally:
            # the session is released after the attempt has ended (its result is written):
            # the release is not on the job's way to FINISHED
            if sh is None:
                self._release(worker, session)
            else:
                self._done_with(sh)
            _log(params, f"[jm] ended {time.strftime('%H:%M:%S')}\n")
            if not run.exited.done():
                run.exited.set_result(outcome)

    def _acquire(self, worker: Any, key: tuple) -> Shared:
        """The warm session of `key` (a new one if it has none, or its one idled too
        long), counted as in use until `_done_with`; the least recently used beyond
        SHARED_MAX are retired."""
        now = time.monotonic()
        sh = self._shared.get(key)
        if sh is not None and now - sh.used > SHARED_IDLE:
            self._retire(key, sh)
            sh = None
        if sh is None:
            sh = self._shared[key] = Shared(str(uuid.uuid4()), worker)
            while len(self._shared) > SHARED_MAX:
                old_key = next(iter(self._shared))
                self._retire(old_key, self._shared[old_key])
        sh.used = now
        sh.users += 1
        self._shared.move_to_end(key)
        return sh

    def _retire(self, key: tuple, sh: Shared) -> None:
        """No new job goes to `sh`; it is released once its last running job is done."""
        if self._shared.get(key) is sh:
            del self._shared[key]
        sh.retired = True
        if sh.users == 0:
            self._release(sh.worker, sh.id)

    def _done_with(self, sh: Shared) -> None:
        sh.users -= 1
        if sh.retired and sh.users == 0:
            self._release(sh.worker, sh.id)

    def _release(self, worker: Any, session: str) -> None:
        closing = asyncio.ensure_future(
            _quietly(worker.call(P.CloseSession(session, True), timeout=10)))
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)


async def _spark_ready(params: RunParams) -> None:
    """As a job process does: wait for the peer's Connect server (a peer just started,
    or restarting its server) up to spark.connect.startup-timeout."""
    ready = params.spark_ready_file
    deadline = time.monotonic() + params.spark_wait
    while ready and not os.path.exists(ready):
        if time.monotonic() > deadline:
            raise TimeoutError("the peer's Spark Connect server is not ready after "
                               f"{params.spark_wait} s")
        await asyncio.sleep(0.1)


async def _quietly(aw: Any) -> None:
    try:
        await asyncio.shield(aw)
    except Exception:
        pass


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)  # the attempt's run folder
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _log(params: RunParams, line: str) -> None:
    path = params.log_path
    if path:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a") as f:
            f.write(line)
