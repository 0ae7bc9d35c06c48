"""The process of one Livy `pyspark` interactive session: runs its statements' Python code,
one at a time in arrival order, in one namespace holding `spark`, a Spark Connect session
attached to the session's id (made at the first statement, so the process starts fast).

    python -m jm.runtime.livyrepl SPARK_CONNECT_URL SESSION_ID [PYFILE ...]

(run by the session's environment's interpreter when its conf names requirements; its
pyFiles, the peer's local copies, first on sys.path).

Requests (jm/runtime/livyproto.py) come as frames on stdin and are read by a thread of
their own, so that an Interrupt reaches a running statement; the code runs in the main
thread (a signal ends a `time.sleep` there, and only there). Replies go out on the
process's original stdout; fd 0 and 1 become /dev/null and the log for the user's code.
The process ends at the end of its input (the peer is gone).

A statement's result carries the statements that define the Spark session's state which
it ran (`state`, for a replay on another peer after a failover): recorded by wrapping the
session's Connect client, not by reading the user's Python:

* SQL run through `spark.sql` that jm.policy.sql.sqlparse classifies as STATE;
* `spark.conf.set(k, v)` as `SET k=v`, `spark.conf.unset(k)` as `RESET k`;
* `df.createOrReplaceTempView(name)`, `df.createTempView(name)` (not the global ones) as
  the Connect command itself, in a statement of jm.policy.sql.connectplan.
A command that failed is not recorded.
"""
from __future__ import annotations

import builtins
import importlib
import dataclasses
import faulthandler
import os
import queue
import signal
import sys
import threading
import traceback
from typing import Any, Callable, Optional

from jm.policy.sql import connectplan
from jm.runtime import livyproto as P
from jm.runtime.confine import confine_self
from jm.runtime.livyexec import NoSparkContext, capture, execute
from jm.runtime.usercode import add_pyfiles

CANCELLED = "the statement was cancelled"
SIGNAL_AFTER = 1.5   # s between cancelling a statement's Spark operations and SIGINT


def sql_text(command: Any) -> Optional[str]:
    """The SQL text of a Connect `sql_command` (None if it has parameters or views: its
    text alone would not replay it)."""
    sql = command.sql_command
    if not sql.HasField("input"):
        return None if (sql.args or sql.pos_args or sql.named_arguments
                        or sql.pos_arguments) else sql.sql
    if sql.input.WhichOneof("rel_type") != "sql":
        return None
    q = sql.input.sql
    if q.args or q.pos_args or q.named_arguments or q.pos_arguments:
        return None
    return q.query


class Recorder:
    """The state-defining statements (and notes) of the statement that runs."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.state: list = []
        self.notes: list = []

    def start(self) -> None:
        with self.lock:
            self.state, self.notes = [], []

    def record(self, statement: str) -> None:
        with self.lock:
            self.state.append(statement)

    def note(self, text: str) -> None:
        with self.lock:
            self.notes.append(text)

    def take(self) -> tuple[tuple, list]:
        with self.lock:
            out = tuple(self.state), list(self.notes)
            self.state, self.notes = [], []
        return out


def _temp_views(spark: Any) -> set:
    try:
        return {r.viewName.lower() for r in spark.sql("SHOW VIEWS").collect() if r.isTemporary}
    except Exception:
        return set()


def watch(spark: Any, rec: Recorder) -> None:
    """Wrap the Connect client of `spark` so that what defines its state is recorded."""
    from jm.policy.sql.sqlparse import classify
    from jm.policy.sql.sqlstmt import STATE
    from jm.policy.sql.flinksql import spark_reset, spark_set
    client = spark.client
    execute_command, config = client.execute_command, client.config

    def recorded_execute(command: Any, observations: Any = None) -> Any:
        kind = command.WhichOneof("command_type")
        text = sql_text(command) if kind == "sql_command" else None
        state = text is not None and classify(text, lambda: _temp_views(spark)) == STATE
        result = execute_command(command, observations)
        if state:
            rec.record(text)
        elif kind == "create_dataframe_view" and not command.create_dataframe_view.is_global:
            data = command.SerializeToString()
            name = command.create_dataframe_view.name
            if len(data) > connectplan.MAX_COMMAND:
                rec.note(connectplan.too_big_note(name, len(data)))
            else:
                rec.record(connectplan.encode_view(name, data))
        return result

    def recorded_config(operation: Any) -> Any:
        result = config(operation)
        op = operation.WhichOneof("op_type")
        if op == "set":
            for kv in operation.set.pairs:
                rec.record(spark_set(kv.key, kv.value))
        elif op == "unset":
            for key in operation.unset.keys:
                rec.record(spark_reset(key))
        return result

    client.execute_command = recorded_execute
    client.config = recorded_config


class Repl:
    def __init__(self, remote: str, session_id: str, out: Any) -> None:
        self.remote, self.session_id, self.out = remote, session_id, out
        self.out_lock = threading.Lock()
        self.ns: dict = {"__name__": "__main__", "__builtins__": builtins,
                         "sc": NoSparkContext()}
        self.spark: Any = None
        self.rec = Recorder()
        self.requests: queue.Queue = queue.Queue()
        self.lock = threading.Lock()
        self.waiting: set = set()     # statements received, not started
        self.cancelled: set = set()   # ... and interrupted before they started
        self.running: Optional[int] = None
        self.interrupted = False      # the running statement was interrupted
        self.armed = False            # the user's code runs: SIGINT interrupts it
        self.warm: Optional[threading.Thread] = None   # importing pyspark

    # ---- replies --------------------------------------------------------------------
    def reply(self, request_id: int, reply: P.Reply) -> None:
        try:
            frame = P.CODEC.pack(reply, request_id)
        except Exception as exc:  # a value msgpack refuses
            frame = P.CODEC.pack(P.Reply(False, None, f"{type(exc).__name__}: {exc}"), request_id)
        try:
            with self.out_lock:
                self.out.write(frame)
                self.out.flush()
        except (BrokenPipeError, ValueError, OSError):
            os._exit(0)  # the peer is gone

    # ---- the reader thread ----------------------------------------------------------
    def read(self, stdin: Any) -> None:
        for request_id, message in P.CODEC.requests(stdin):
            if isinstance(message, P.Interrupt):
                self.reply(request_id, P.Reply(True, self.interrupt(message.statement)))
            elif isinstance(message, P.RunCode):
                with self.lock:
                    self.waiting.add(message.statement)
                self.requests.put((request_id, message))
            else:
                self.reply(request_id, P.Reply(False, None, f"unexpected {message!r}"))
        os._exit(0)  # the peer closed the pipe (or died)

    def interrupt(self, statement: int) -> bool:
        with self.lock:
            if statement in self.waiting:
                self.cancelled.add(statement)
                return True
            if self.running != statement:
                return False
            self.interrupted = True
            if self.spark is None:
                self._signal(statement)
                return True
            try:
                self.spark.interruptTag(f"jm-livy-{statement}")
            except Exception:
                traceback.print_exc()
        # the code may wait for Spark: its operations end first (a KeyboardInterrupt in
        # the middle of a Connect call can leave the operation running in the server)
        timer = threading.Timer(SIGNAL_AFTER, self._signal, (statement, True))
        timer.daemon = True
        timer.start()
        return True

    def _signal(self, statement: int, lock: bool = False) -> None:
        """SIGINT to the code (in the main thread), if statement `statement` still runs."""
        if lock:
            with self.lock:
                return self._signal(statement)
        if self.running == statement and self.armed:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)

    # ---- the main thread ------------------------------------------------------------
    def on_sigint(self, signum: int, frame: Any) -> None:
        if self.armed:  # (a late signal, after the code ended, is dropped)
            self.armed = False
            raise KeyboardInterrupt

    def guard(self, fn: Callable[[], Any]) -> Any:
        try:
            with self.lock:
                if self.interrupted:
                    raise KeyboardInterrupt
                self.armed = True
            return fn()
        finally:
            self.armed = False

    def session(self) -> Any:
        if self.spark is None:
            if self.warm is not None:
                self.warm.join()  # (two threads importing pyspark's modules may deadlock)
            from jm.runtime.jobrun import connect_builder, with_session
            spark = connect_builder(with_session(self.remote, self.session_id)).getOrCreate()
            watch(spark, self.rec)
            from jm.runtime import livycompat
            livycompat.install()  # classic PySpark's df.toJSON() (sparkmagic's %%sql)
            self.ns.update(spark=spark, sqlContext=spark)
            with self.lock:
                self.spark = spark
        return self.spark

    def run(self, m: P.RunCode) -> P.CodeResult:
        with self.lock:
            self.waiting.discard(m.statement)
            if m.statement in self.cancelled:
                self.cancelled.discard(m.statement)
                return P.CodeResult("error", ename="KeyboardInterrupt", evalue=CANCELLED)
            self.running, self.interrupted = m.statement, False
        self.rec.start()
        try:
            result = self._run(m)
        finally:
            with self.lock:
                self.running, interrupted = None, self.interrupted
        state, notes = self.rec.take()
        if interrupted and result.status == "error":
            result = dataclasses.replace(result, ename="KeyboardInterrupt", evalue=CANCELLED)
        text = "\n".join(([result.text] if result.text else []) + notes)
        return dataclasses.replace(result, text=text, state=state)

    def _run(self, m: P.RunCode) -> P.CodeResult:
        try:
            spark = self.session()
        except Exception as exc:
            return P.CodeResult("error", "", ename=type(exc).__name__,
                                evalue=f"no Spark session: {exc}")
        tag = f"jm-livy-{m.statement}"
        spark.addTag(tag)  # (thread-local: the RPCs of this statement's code)
        try:
            return execute(m.code, self.ns, self.guard)
        finally:
            spark.removeTag(tag)

    def serve(self) -> None:
        while True:
            request_id, message = self.requests.get()
            try:
                value = dataclasses.asdict(P.bounded(self.run(message)))
                reply = P.Reply(True, value)
            except BaseException as exc:  # every request is answered
                reply = P.Reply(False, None, f"{type(exc).__name__}: {exc}")
            self.reply(request_id, reply)


def _warm() -> None:
    try:
        importlib.import_module("pyspark.sql.connect.session")  # before the first statement
    except Exception:
        traceback.print_exc()


def main(argv: Optional[list] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    remote, session_id = argv[0], argv[1]
    confine_self(os.environ)  # the job processes' limits and user, before any user code
    add_pyfiles(argv[2:])  # the session's pyFiles: its code imports them
    out = os.fdopen(os.dup(1), "wb")  # the protocol's; fd 1 becomes the log
    stdin = os.fdopen(os.dup(0), "rb", buffering=0)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)  # the user's code reads nothing of the protocol
    os.close(null)
    capture()  # sys.stdout, sys.stderr: the log, or the running statement's output
    sys.stdin = open(os.devnull)
    faulthandler.register(signal.SIGUSR1, file=sys.__stderr__)  # every thread's stack in the log, on demand
    repl = Repl(remote, session_id, out)
    signal.signal(signal.SIGINT, repl.on_sigint)
    threading.Thread(target=repl.read, args=(stdin,), name="jm-livy-reader",
                     daemon=True).start()
    repl.warm = threading.Thread(target=_warm, name="jm-livy-warm", daemon=True)
    repl.warm.start()
    repl.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
