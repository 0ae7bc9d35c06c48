"""What runs inside a job process: the JobContext and the call of the user's code.

This module runs in a process forked from the warm zygote. It imports pyspark only
when the job touches `ctx.spark` (or is a SQL job), never before the fork.
"""
from __future__ import annotations

import datetime
import decimal
import json
import math
import os
import signal
import socket
import sys
import threading
import time
import traceback
from dataclasses import replace
from typing import Any, Optional

from jm.policy.jobs.bounds import readable, truncate
from jm.policy.jobs.hopeless import LOAD, RUN
from jm.policy.jobs.runparams import RunParams
from jm.policy.jobs.submitopts import FILE_PROPERTIES, entries
from jm.runtime.sqlconf import UDF_PYTHON
from jm.runtime.usercode import (Script, compile_script, failure_record, load_entry,
                                 run_script, spark_started)

# a Connect session's Python for its UDFs (a job's own environment: its requirements)


class JobContext:
    """Handed to `main(ctx)`; see DESIGN.md's job model."""

    def __init__(self, params: RunParams) -> None:
        self.args: dict = dict(params.args)  # the user's own copy
        self.job_id: str = params.job_id
        self.attempt: int = params.attempt
        self.node: str = params.node
        self.checkpoint_dir: str = params.checkpoint_dir
        self.restore_path: Optional[str] = params.restore_path
        self.stop_requested = threading.Event()
        self._spark_remote: Optional[str] = params.spark_remote
        self._session_id: Optional[str] = params.session_id
        self._spark_ready_file: Optional[str] = params.spark_ready_file
        self._spark_wait: float = params.spark_wait
        self.spark_mode: str = params.spark_mode or "connect"
        self._pyfiles: list[str] = list(params.pyfiles)
        self._python_exec: Optional[str] = params.python_exec
        # the interpreter its UDFs run (its environment's, or its unpacked archive's)
        self._udf_python: Optional[str] = params.executor_python or params.python_exec
        self._shipped = {k: params.spark_conf[k] for k in FILE_PROPERTIES
                         if params.spark_conf.get(k)}  # spark-submit's --jars, --files...
        self._spark = None

    @property
    def spark(self):
        """The job's SparkSession, created on first use: a session of the job's own
        application (classic mode), or a Spark Connect session (connect mode)."""
        if self.spark_mode == "classic":
            from jm.runtime.sparkapp import classic_session
            return classic_session()
        if self._spark is None:
            if not self._spark_remote:
                raise RuntimeError("no Spark is configured for this peer "
                                   "(spark.connect.embedded is false and spark.remote is unset)")
            self._wait_for_spark()
            url = with_session(self._spark_remote, self._session_id)
            self._spark = connect_builder(url).getOrCreate()
            _calm_grpc()
            shipped = [p for p in self._pyfiles if p.endswith((".py", ".zip", ".egg"))]
            if shipped:  # as spark-submit --py-files: importable by UDFs on the executors
                self._spark.addArtifacts(*shipped, pyfile=True)
            if self._udf_python:  # its UDFs run in its own environment (its requirements)
                self._spark.conf.set(UDF_PYTHON, self._udf_python)
            _ship(self._spark, self._shipped)
        return self._spark

    def _wait_for_spark(self) -> None:
        deadline = time.monotonic() + self._spark_wait
        while True:
            if self._spark_ready_file is None or os.path.exists(self._spark_ready_file):
                if _port_open(self._spark_remote):
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"Spark Connect at {self._spark_remote} was not ready "
                                   f"within {self._spark_wait:g} s")
            time.sleep(0.1)

    def await_termination(self, *queries: Any) -> None:
        """Block until one of the streaming `queries` ends (its failure raised here) or the
        job is asked to stop (a cancel, a stop with a savepoint, a move: each query is then
        stopped between micro-batches, and this returns). One waiting call per query
        instead of a poll of `query.isActive`, which is a request to the engine (an
        ExecutePlan) each time."""
        wake = threading.Event()
        errors: list = []

        def watch(query: Any) -> None:
            try:
                query.awaitTermination()
            except BaseException as exc:
                errors.append(exc)
            finally:
                wake.set()

        def relay() -> None:
            self.stop_requested.wait()
            wake.set()
        for target, args in [(relay, ())] + [(watch, (q,)) for q in queries]:
            threading.Thread(target=target, args=args, name="jm-await", daemon=True).start()
        wake.wait()  # (the SIGTERM handler still runs: a lock's wait is interruptible)
        if self.stop_requested.is_set():
            for query in queries:
                if query.isActive:
                    query.stop()  # between micro-batches: nothing committed twice
            return
        if errors:
            raise errors[0]

    def close(self) -> None:
        """Stop the streaming queries this job left running, release its Spark session."""
        if self._spark is not None:
            try:
                stop_queries(self._spark)
            except Exception:
                pass
            try:
                self._spark.stop()
            except Exception:
                pass


def connect_builder(url: str) -> Any:
    """A SparkSession builder for the Spark Connect URL `url`. With the peer's token in
    this process's environment (SPARK_CONNECT_AUTHENTICATE_TOKEN, the embedded server's)
    and none in the URL, the token goes as a plain `authorization` header on every call:
    pyspark would otherwise add gRPC call credentials, a Python plugin run on a thread
    for every call (a tenth of a `select 1`'s time on a busy peer: docs/benchmarks.md,
    "Hardening"), over gRPC local credentials. Same header, same check by the server."""
    from pyspark.sql import SparkSession
    from pyspark.sql.connect.client import DefaultChannelBuilder
    from pyspark.sql.connect.session import SparkSession as ConnectSession
    token = os.environ.get("SPARK_CONNECT_AUTHENTICATE_TOKEN")
    if not token or ";token=" in url or ";authorization=" in url.lower():
        return SparkSession.builder.remote(url)

    class _HeaderToken(DefaultChannelBuilder):
        @property
        def token(self) -> Optional[str]:  # (the header carries it)
            return None

    builder = _HeaderToken(url)
    builder.set("authorization", f"Bearer {token}")
    # what SparkSession.builder.remote() sets: pyspark.sql.functions and the DataFrame API
    # take this process for a Spark Connect client
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    return ConnectSession.builder.channelBuilder(builder)


def with_session(remote: str, session_id: Optional[str]) -> str:
    """The Spark Connect URL with a fixed session id (so the JobMaster can stop what a
    killed job process left running in the server)."""
    if not session_id:
        return remote
    sep = ";" if "/;" in remote else ("" if remote.endswith("/") else "/") + ";"
    return f"{remote}{sep}session_id={session_id}"


def stop_queries(spark) -> int:
    stopped = 0
    for q in spark.streams.active:
        q.stop()
        stopped += 1
    return stopped


def cleanup_session(params: RunParams) -> dict:
    """Stop every streaming query of a killed attempt's Spark session and release it."""
    ctx = JobContext(params)
    try:
        return {"stopped": stop_queries(ctx.spark)}
    finally:
        ctx.close()


def _port_open(remote: str) -> bool:
    hostport = remote.split("://", 1)[-1].split("/", 1)[0].split(";", 1)[0]
    host, _, port = hostport.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port or 15002)), timeout=1):
            return True
    except OSError:
        return False


def finite(value: Any) -> Any:
    """`value` with every NaN or infinite float as a string ("nan", "inf", "-inf", as
    jsonable does): JSON has no such numbers, and a client's parser refuses them."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def jsonable(value: Any) -> Any:
    """Turn Spark row values into JSON-able values."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else str(value)
    if isinstance(value, (datetime.date, datetime.datetime, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if hasattr(value, "asDict"):
            return {k: jsonable(v) for k, v in value.asDict().items()}
        return [jsonable(v) for v in value]
    return str(value)


def run_sql(ctx: JobContext, sql: str, max_rows: int) -> dict:
    df = ctx.spark.sql(sql)
    rows = df.limit(max_rows + 1).collect() if max_rows > 0 else []
    return {"columns": list(df.columns),
            "rows": [[jsonable(v) for v in row] for row in rows[:max_rows]],
            "truncated": len(rows) > max_rows}


def _write_json(path: str, obj: Any) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def _write_error(path: str, record: dict, params: RunParams) -> None:
    """error.json with readable texts (a lone surrogate of a file name becomes its escape)
    of at most jobmanager.failure.max-size bytes each, however large the exit message."""
    limit = params.max_failure_size
    out = {key: truncate(value, limit, "tail" if key == "traceback" else "head")
           for key, value in record.items()}
    _write_json(path, out)


def _start_driver(params: RunParams, ctx: JobContext):
    """Classic mode: the job's own driver JVM, then a thread reporting its application."""
    from jm.runtime.sparkapp import INFO_FILE, InfoWatcher, app_info, start_driver
    start_driver(params, params.name or ctx.job_id, list(params.pyfiles))
    watcher = InfoWatcher(os.path.join(os.path.dirname(params.result_path), INFO_FILE),
                          app_info, params.spark_waiting_after)
    watcher.start()
    return watcher


def _ship(spark: Any, conf: dict) -> None:
    """spark-submit's --jars, --files and --archives of a connect-mode job as its
    session's artifacts (an archive's '#name' is the folder it is unpacked as)."""
    for prop, kind in (("spark.jars", {}), ("spark.files", {"file": True}),
                       ("spark.archives", {"archive": True})):
        found = entries(conf.get(prop) or "")
        if found:
            spark.addArtifacts(*found, **kind)


def _connect_session(ctx: JobContext, conf: dict) -> None:
    """Connect mode for a script: its `SparkSession.builder.getOrCreate()` returns this
    job's session on the peer's Spark Connect server (SPARK_REMOTE with the job's
    session id), with the job's properties set where Spark allows it at runtime."""
    if not ctx._spark_remote:
        return  # no Spark Connect for this peer (README, Known limits)
    ctx._wait_for_spark()
    os.environ["SPARK_REMOTE"] = with_session(ctx._spark_remote, ctx._session_id)
    if not conf and not ctx._pyfiles and not ctx._python_exec:
        return
    spark = ctx.spark  # the script's getOrCreate() returns it, pyfiles added
    for key, value in conf.items():
        if key in FILE_PROPERTIES:  # (session artifacts: added with the session)
            continue
        try:
            spark.conf.set(key, value)
        except Exception as exc:  # a static property: only a server start sets it
            print(f"[jm] spark-conf {key} not applied to the Connect session: "
                  f"{str(exc).splitlines()[0][:300]}", file=sys.stderr, flush=True)


def _script_session(ctx: JobContext):
    """The session a script made (or was given), for stopping its streaming queries."""
    try:
        if ctx.spark_mode == "connect":
            if ctx._spark is not None:
                return ctx._spark
            from pyspark.sql.connect.session import SparkSession as RemoteSession
            return RemoteSession._get_default_session()
        from pyspark.sql import SparkSession
        return SparkSession._instantiatedSession
    except Exception:
        return None


def _stop_handler(ctx: JobContext, script: bool, streaming: bool):
    """SIGTERM (a cancel, stop or move): entry jobs see ctx.stop_requested. A script is
    stopped as Ctrl-C stops it under spark-submit: its Spark jobs are cancelled and
    KeyboardInterrupt is raised in it; a streaming script's queries are stopped instead,
    so its awaitTermination() returns and it ends by itself."""
    def handler(signum, frame):
        if ctx.stop_requested.is_set():
            return
        ctx.stop_requested.set()
        if not script:
            return
        session = _script_session(ctx)
        if streaming and session is not None:
            threading.Thread(target=_stop_queries_quietly, args=(session,),
                             daemon=True).start()
            return
        from jm.runtime.sparkapp import interrupt_driver
        interrupt_driver()
        raise KeyboardInterrupt("stopped by the JobManager (cancel, stop or move)")
    return handler


def _stop_queries_quietly(session) -> None:
    try:
        stop_queries(session)
    except Exception as exc:
        print(f"[jm] stopping the streaming queries failed: {exc}", file=sys.stderr,
              flush=True)


class _Stage:
    """Where an attempt is: loading the user's code or running it (jm/policy/jobs/hopeless.py)."""
    phase = LOAD


def run_job(params: RunParams) -> int:
    """Run one attempt; write result.json or error.json; return the exit code."""
    ctx = JobContext(params)
    _prepare_process(ctx, params)
    classic = ctx.spark_mode == "classic" and not params.cleanup_session
    stage, watcher, progress = _Stage(), None, None
    print(f"[jm] job {ctx.job_id} attempt {ctx.attempt} on {ctx.node} pid {os.getpid()}",
          flush=True)
    try:
        script = None
        if params.script is not None and not params.cleanup_session:
            script = compile_script(params.script)  # before any driver JVM or session
        stage.phase = RUN
        if classic:
            watcher = _start_driver(params, ctx)
        elif script is not None:
            _connect_session(ctx, dict(params.spark_conf))
        if params.streaming and not params.cleanup_session:  # its queries' last progress
            from jm.runtime.progress import start_listener
            progress = start_listener(os.path.dirname(params.result_path),
                                      lambda: _script_session(ctx))
        _write_result(params, _call(ctx, params, script, stage))
        return 0
    except SystemExit as exc:
        if exc.code in (None, 0):
            _write_json(params.result_path, {"result": None})
            return 0
        _fail(params, exc, stage.phase, spark_started(classic, ctx._spark), show=False)
        return 1
    except BaseException as exc:
        _fail(params, exc, stage.phase, spark_started(classic, ctx._spark), show=True)
        return 1
    finally:
        if progress is not None:
            progress.stop()
        _release(ctx, classic, watcher)


def _call(ctx: JobContext, params: RunParams, script: Optional[Script], stage: _Stage) -> Any:
    """The attempt's work: a killed attempt's cleanup, the SQL, the script or the entry
    function (its module imported first: the loading stage)."""
    if params.cleanup_session:
        return cleanup_session(replace(params, session_id=params.cleanup_session))
    if params.sql:
        return run_sql(ctx, params.sql, params.max_result_rows)
    if script is not None:
        return run_script(script, list(params.argv), list(params.pyfiles))
    stage.phase = LOAD
    func = load_entry(params.entry, list(params.pyfiles))
    stage.phase = RUN
    return func(ctx)


def _write_result(params: RunParams, value: Any) -> None:
    value = finite(value)  # NaN and infinities would make the answers invalid JSON
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"the job's return value is not JSON-serialisable: {exc}")
    limit = params.max_result_size
    if len(text) > limit:
        raise ValueError(f"the job's result is {len(text)} bytes, more than "
                         f"jobmanager.result.max-size ({limit} bytes)")
    _write_json(params.result_path, {"result": value})


def _fail(params: RunParams, exc: BaseException, phase: str, started: bool,
          show: bool) -> None:
    """error.json for the failure (its line, the user's frames, `hopeless`), and the
    traceback in the job's log (`show`; an exit's code says it all)."""
    try:
        record = failure_record(exc, phase, started, params.shown_names)
    except Exception:  # the plain text, never a second failure
        record = {"exception": f"{type(exc).__name__}: {exc}",
                  "traceback": traceback.format_exc()}
    if show:
        print(readable(record["traceback"]), file=sys.stderr, flush=True)
    if record.get("hopeless"):
        print(f"[jm] not restarted (whatever the restart strategy): {record['hopeless']}",
              file=sys.stderr, flush=True)
    _write_error(params.error_path, record, params)


def _prepare_process(ctx: JobContext, params: RunParams) -> None:
    """The job's environment (JM_JOB_ID, JM_ATTEMPT, JM_CHECKPOINT_DIR) and its SIGTERM
    handler."""
    os.environ.update({"JM_JOB_ID": ctx.job_id, "JM_ATTEMPT": str(ctx.attempt),
                       "JM_CHECKPOINT_DIR": ctx.checkpoint_dir})
    signal.signal(signal.SIGTERM,
                  _stop_handler(ctx, params.script is not None, params.streaming))
    _calm_grpc()  # (if its zygote preloaded pyspark's client; else at its session)


GRPC_WAIT_SLICE = 0.5  # s a thread blocked in a gRPC call sleeps between two looks


def _calm_grpc() -> None:
    """gRPC's Python client waits for a response in slices of 100 ms, so that a signal
    handler never waits longer (grpc._common.MAXIMUM_WAIT_TIMEOUT). A streaming job blocks
    in two such waits for its whole life (its awaitTermination or query poll, and its
    listener's event stream): ~1.3 ms of CPU a second per idle job process. The job's
    SIGTERM handler only sets a flag and starts a thread: half a second more before it
    runs is nothing against a stop's timeouts."""
    common = sys.modules.get("grpc._common")  # (not imported here: a job without Spark
    if getattr(common, "MAXIMUM_WAIT_TIMEOUT", None) == 0.1:  # should not pay for it)
        common.MAXIMUM_WAIT_TIMEOUT = GRPC_WAIT_SLICE


def _release(ctx: JobContext, classic: bool, watcher) -> None:
    """After the attempt: the Spark session, the classic driver and its watcher, and
    what the process printed."""
    ctx.close()
    if classic:
        from jm.runtime.sparkapp import stop_driver
        stop_driver()
    if watcher is not None:
        watcher.done.set()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
