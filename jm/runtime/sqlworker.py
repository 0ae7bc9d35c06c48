"""The SQL gateway's worker: one process per peer that holds the Spark Connect sessions of
the gateway sessions placed on that peer and runs their statements, so that a statement
costs no job process and the peer itself never opens a Spark channel.

    python -m jm.runtime.sqlworker SPARK_REMOTE THREADS

Requests come as frames (jm/runtime/sqlproto.py) on stdin; replies go out on the
process's original stdout (Spark's and the user's prints go to stderr, the peer's log).
Each request runs on a thread of a pool; a statement's rows are read from Spark a page
at a time (one Arrow batch at a time), so a large result never sits whole in this process.
"""
from __future__ import annotations

import collections
import importlib
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

from jm.runtime import sqlconf
from jm.runtime.confine import confine_self
from jm.runtime import sqlproto as P

MAX_ERROR = 16000
CANCEL_WAIT = 10.0   # s: a cancel interrupts a statement not yet known to the server again
CANCEL_AGAIN = 0.1   # s: ... this often
EARLY_CANCELS = 1000  # cancels kept for Executes that have not arrived


def error_text(exc: BaseException) -> str:
    """Spark's own message first (its JVM stack trace, if any, after it)."""
    msg = str(exc).strip() or type(exc).__name__
    name = type(exc).__name__
    return (msg if msg.startswith(name) else f"{name}: {msg}")[:MAX_ERROR]


class Cancelled(Exception):
    """A statement cancelled before it started."""


class Operation:
    def __init__(self, session: str, tag: str) -> None:
        self.session = session
        self.tag = tag
        self.rows: Any = None        # the iterator over the result's rows
        self.width = 0
        self.lock = threading.Lock()  # one page at a time
        self.closed = False
        self.running = False  # its statement's execution is under way (on_Execute)


class Rows:
    """A result's rows, converted from Arrow one batch at a time; close() ends its
    execution in the server."""

    def __init__(self, parts: Any, schema: Any, first: Any) -> None:
        self.parts, self.schema = parts, schema
        self.pending: list = []
        if first is not None:
            self._add(first)

    def _add(self, table: Any) -> None:
        from pyspark.sql.conversion import ArrowTableToRowsConversion
        self.pending = list(reversed(
            ArrowTableToRowsConversion.convert(table, self.schema, binary_as_bytes=True)))

    def __iter__(self) -> "Rows":
        return self

    def __next__(self) -> Any:
        from pyspark.sql.types import StructType
        while not self.pending:
            part = next(self.parts)  # StopIteration: the end
            if not isinstance(part, StructType):
                self._add(part)
        return self.pending.pop()

    def close(self) -> None:
        self.parts.close()


def stream(df: Any) -> tuple[Any, Rows]:
    """A DataFrame's schema and rows from one ExecutePlan: the schema comes ahead of the
    Arrow batches in the server's answer (asking `df.schema` first would cost an
    AnalyzePlan round trip more per statement)."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructType
    client = df._session.client
    parts = client.to_table_as_iterator(df._plan.to_proto(client), df._plan.observations)
    first = next(parts, None)
    if isinstance(first, StructType):
        return first, Rows(parts, first, None)
    if first is None:  # no schema and no rows in the answer
        return df.schema, Rows((p for p in ()), None, None)
    schema = from_arrow_schema(first.schema, prefer_timestamp_ntz=True)
    return schema, Rows(parts, schema, first)


def replay(spark: Any, statement: str) -> None:
    """Run one of a session's recorded state-defining statements: SQL, or the Spark Connect
    command a jm.policy.sql.connectplan statement carries (a temporary view made from a
    DataFrame; nothing else)."""
    from jm.policy.sql.connectplan import decode
    command = decode(statement)
    if command is None:
        spark.sql(statement).collect()
        return
    from pyspark.sql.connect.proto import Command
    cmd = Command.FromString(command)
    if (cmd.WhichOneof("command_type") != "create_dataframe_view"
            or cmd.create_dataframe_view.is_global):
        raise ValueError("a recorded Connect command that is not a temporary view")
    spark.client.execute_command(cmd)


class Worker:
    def __init__(self, remote: str, out) -> None:
        self.remote = remote
        self.out = out
        self.out_lock = threading.Lock()
        self.sessions: dict[str, Any] = {}
        self.properties: dict[str, dict] = {}  # each session's, for a bare RESET
        self.session_locks: dict[str, threading.Lock] = {}
        self.ops: dict[str, Operation] = {}
        # operations cancelled before their Execute arrived (both are in flight at once)
        self.cancelled: collections.deque = collections.deque(maxlen=EARLY_CANCELS)
        self.lock = threading.Lock()

    # ---- replies --------------------------------------------------------------------
    def reply(self, request_id: int, reply: P.Reply) -> None:
        frame = P.CODEC.pack(reply, request_id)
        with self.out_lock:
            self.out.write(frame)
            self.out.flush()

    def handle(self, request_id: int, message: Any) -> None:
        try:
            value = getattr(self, "on_" + type(message).__name__)(message)
            reply = P.Reply(True, value)
        except BaseException as exc:  # every request is answered
            reply = P.Reply(False, None, error_text(exc))
        try:
            self.reply(request_id, reply)
        except (BrokenPipeError, ValueError):
            os._exit(0)  # the peer is gone

    # ---- sessions -------------------------------------------------------------------
    def _session(self, handle: str):
        spark = self.sessions.get(handle)
        if spark is None:
            raise LookupError(f"session {handle} is not open in this worker")
        return spark

    def on_OpenSession(self, m: P.OpenSession) -> dict:
        from jm.runtime.jobrun import connect_builder, with_session
        with self.lock:
            lock = self.session_locks.setdefault(m.session, threading.Lock())
        with lock:
            if m.session in self.sessions:
                return {"replayed": 0, "errors": []}
            spark = connect_builder(with_session(self.remote, m.session)).create()
            props = dict(m.properties or {})
            errors = sqlconf.set_properties(spark, props, error_text)
            errors += sqlconf.add_deps(spark, m.artifacts, m.python, error_text)
            for statement in m.replay:
                try:
                    replay(spark, statement)
                    if sqlconf.is_bare_reset(statement):  # back to the properties
                        errors += sqlconf.set_properties(spark, props, error_text)
                except Exception as exc:
                    errors.append(f"{statement[:200]}: {error_text(exc)[:500]}")
            self.sessions[m.session] = spark
            self.properties[m.session] = props
            return {"replayed": len(m.replay), "errors": errors}

    def on_CloseSession(self, m: P.CloseSession) -> bool:
        spark = self.sessions.pop(m.session, None)
        self.properties.pop(m.session, None)
        for op_id, op in list(self.ops.items()):
            if op.session == m.session:
                self._drop(op_id)
        if spark is None:
            return False
        if m.release:
            try:
                spark.stop()  # ends the session in the server (temp views, settings)
            except Exception:
                pass
        else:
            try:
                spark.client.close()
            except Exception:
                pass
        return True

    # ---- operations -----------------------------------------------------------------
    def on_Execute(self, m: P.Execute) -> dict:
        spark = self._session(m.session)
        op = Operation(m.session, "jm-op-" + m.op)
        with self.lock:
            if m.op in self.cancelled:
                self.cancelled.remove(m.op)
                raise Cancelled(f"operation {m.op} was cancelled before it started")
            self.ops[m.op] = op
            op.running = True
        spark.addTag(op.tag)  # thread-local: this statement's RPCs, for a cancel
        applied: dict = {}
        try:
            applied = sqlconf.apply(spark, m.config)  # the statement's own (Flink's)
            if op.closed:
                raise Cancelled(f"operation {m.op} was cancelled before it started")
            schema, op.rows = stream(spark.sql(m.statement))
            op.width = len(schema.fields)
            if sqlconf.is_bare_reset(m.statement):  # back to the session's properties
                sqlconf.set_properties(spark, self.properties.get(m.session, {}))
            page = self._page(op, m.page_rows)
        except BaseException:
            self._drop(m.op)
            raise
        finally:
            op.running = False
            spark.removeTag(op.tag)
            sqlconf.restore(spark, applied)
        return {"schema": schema.jsonValue(), **page}

    def _page(self, op: Operation, n: int) -> dict:
        from jm.runtime.jobrun import jsonable
        rows: list = []
        with op.lock:
            if op.rows is None or op.closed:
                return {"rows": [], "eos": True}
            for row in op.rows:
                rows.append([jsonable(v) for v in row])
                if len(rows) >= n:
                    break
            else:
                op.rows = None
        return {"rows": rows, "eos": op.rows is None}

    def on_Fetch(self, m: P.Fetch) -> dict:
        op = self.ops.get(m.op)
        if op is None:
            raise LookupError(f"operation {m.op} is not open in this worker")
        page = self._page(op, m.page_rows)
        if page["eos"]:
            self._drop(m.op)
        return page

    def on_Cancel(self, m: P.Cancel) -> bool:
        """Stop an operation's execution in Spark. Its Execute may still be on its way
        (then it does not start) or not yet known to the server (then the interrupt is
        sent again until the server has it, or the Execute has ended): a cancel never
        leaves a statement running in Spark."""
        with self.lock:
            op = self.ops.get(m.op)
            if op is None:
                self.cancelled.append(m.op)
                return False
        op.closed = True  # (what has not started of it does not: on_Execute)
        spark = self.sessions.get(op.session)
        deadline = time.monotonic() + CANCEL_WAIT
        while spark is not None:
            try:  # (an interrupt that stopped one of its RPCs: what follows sees closed)
                if spark.interruptTag(op.tag) or not op.running:
                    break
            except Exception:
                break
            if time.monotonic() > deadline:
                break
            time.sleep(CANCEL_AGAIN)
        self._drop(m.op)
        return True

    def on_CloseOperation(self, m: P.CloseOperation) -> bool:
        return self._drop(m.op)

    def _drop(self, op_id: str) -> bool:
        with self.lock:
            op = self.ops.pop(op_id, None)
        if op is None:
            return False
        op.closed = True
        rows, op.rows = op.rows, None
        close = getattr(rows, "close", None)
        if close is not None:
            try:
                close()
            except Exception:
                pass
        return True


def main(argv: Optional[list] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    remote, threads = argv[0], int(argv[1]) if len(argv) > 1 else 16
    confine_self(os.environ)  # users' SQL runs here: a job process's limits, before any
    out = os.fdopen(os.dup(1), "wb")  # the protocol's; fd 1 becomes the log
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    stdin = os.fdopen(0, "rb", buffering=0)
    worker = Worker(remote, out)
    pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix="jm-sql")
    importlib.import_module("pyspark.sql.connect.session")  # once, before any request
    for request_id, message in P.CODEC.requests(stdin):
        pool.submit(worker.handle, request_id, message)
    os._exit(0)  # the peer closed the pipe (or died): nothing to hand over


if __name__ == "__main__":
    sys.exit(main())
