"""The statements of the SQL gateway's sessions on the peer that holds them (Flink SQL
Gateway's operations, rest/sql.py): started, followed, cancelled, closed, their rows
fetched page by page, and each on a session of the SessionHost
(jm/cluster/sql/sessionhost.py).

Operations and their rows live on the session's holder only; the session's record keeps
each statement (its text and kind, a write's end, a session-defining one to replay) for
the session's next holder, except a read answered whole with its first page
(`execute_first`): nothing of it is left to fetch there.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, replace
from typing import Optional, Union

from jm.cluster.batcher import Batcher
from jm.cluster.sql.sqlservices import SqlServices
from jm.cluster.sql.sessionhost import SessionHost
from jm.cluster.sql.sqlops import LocalSession, Operation
from jm.policy.sql import connectplan, flinksql, sparkerror
from jm.policy.sql.opid import op_of
from jm.policy.sql.sqlop import OpStatus, adoption
from jm.policy.sql.sqlparse import READ, STATE, WRITE, classify, temp_views
from jm.runtime import sqlproto as P
from jm.runtime.sqlclient import StatementError, WorkerLost
from jm.wire import sqlresult
from raft.commands import AddSqlStatement, SqlOperation, StartSqlOperations
from raft.node import RaftUnavailable
from jm.api import ROW_FORMATS, ApiError, ResultPage

log = logging.getLogger("jm.sql")

RUNNING, FINISHED, ERROR = OpStatus.RUNNING, OpStatus.FINISHED, OpStatus.ERROR
CANCELED, CLOSED = OpStatus.CANCELED, OpStatus.CLOSED
MAX_OPS_PER_SESSION = 1000
CLASSIFY_INLINE = 4 * 1024  # characters classified on the event loop (parsing: about 1 ms
                            # per KB, bench/sqlparse.py); more in a thread


@dataclass(frozen=True)
class Rows:
    """A statement that ran: its schema (Spark's) and its first rows."""
    schema: Optional[dict]
    rows: tuple


@dataclass(frozen=True)
class Failed:
    """A statement that could not run, or failed: Spark's error first, then the detail."""
    errors: tuple


@dataclass(frozen=True)
class Cancelled:
    """A statement cancelled while it ran."""


Outcome = Union[Rows, Failed, Cancelled]


class SqlStatements:
    def __init__(self, svc: SqlServices, host: SessionHost) -> None:
        self.svc, self.host = svc, host
        self.node, self.conf, self.raft = svc.node, svc.conf, svc.raft
        self.ops_log: Optional[Batcher] = None  # operations, for the session's next holder
        self.flink_ok: set[str] = set()  # operations answered as Flink's SET/RESET (OK)
        self.max_statement_size: int = self.conf["sql-gateway.max-statement-size"]

    def start(self) -> None:
        self.ops_log = Batcher(self.raft, StartSqlOperations,
                               self.conf["rest.write-timeout"], retry=False)
        self.ops_log.start()

    async def close(self) -> None:
        if self.ops_log is not None:
            await self.ops_log.close()

    async def run(self, handle: str, statement: str, request_id: str,
                  max_rows: int) -> Outcome:
        """A statement run to its end in session `handle` (held here) as a client's would
        be (the same request id: the same operation, so after a failover a read runs
        again and a write is answered from the record), with its first `max_rows` rows;
        its operation closed after. An ApiError (5xx) when it cannot run here now (the
        session moving, the lease lost): the caller tries again."""
        op_id = None
        try:
            op_id, page = await self.execute_first(handle, {"statement": statement}, True,
                                                   request_id, "JSON")
            token, rows = 0, []
            while True:
                if page.ready:
                    rows.extend(list(r) for r in page.rows)
                    if page.end or len(rows) >= max_rows:
                        return Rows(self.op_schema(handle, op_id), tuple(rows[:max_rows]))
                    token += 1
                page = await self.fetch(handle, op_id, token, "JSON", True)
        except ApiError as exc:  # (what the REST answers say, as one value)
            if exc.status == 409:
                return Cancelled()
            if exc.status >= 500:
                raise
            return Failed(tuple(exc.errors) or (str(exc),))
        finally:
            if op_id is not None:
                try:
                    await self.close_operation(handle, op_id, True)
                except ApiError:
                    pass

    async def cancel_run(self, handle: str, request_id: str) -> None:
        """Cancel the statement `run` runs with this request id (if it started)."""
        try:
            await self.cancel(handle, op_of(handle, request_id), True)
        except ApiError as exc:
            log.info("cancel of %s in session %s: %s", request_id, handle, exc)

    def op_schema(self, handle: str, op_id: str) -> Optional[dict]:
        """Spark's schema of an operation's rows (None: none, or not run here)."""
        s = self.host.local.get(handle)
        op = s.ops.get(op_id) if s is not None else None
        return op.schema if op is not None else None

    # ---- operations ---------------------------------------------------------------------
    async def execute(self, handle: str, body: dict, forwarded: bool,
                      request_id: str = "", defer_read: bool = False) -> str:
        """Start a statement; its operation's handle. With a request id (X-Request-Id)
        the handle is derived from it: a retried request (an answer lost on the way) gets
        the same operation, the statement runs once. A read runs at once; it is recorded
        for the session's next holder before its handle is answered (`defer_read`: not
        yet, execute_first records it if its rows do not all come in its answer)."""
        statement, config, flink = self._statement(body)
        self.host.held(handle, forwarded)
        # (before the checks below, which must not be split by a wait: two tries of one
        # request at once would both start it)
        kind = await _classify(statement, list(self.host.record(handle)[0].statements))
        s = self.host.held(handle, forwarded)
        if not self.svc.lease_valid():
            raise ApiError(503, "this peer has lost its lease; retry", headers={"Retry-After": "1"})
        self.host.has_spark()
        op_id = op_of(handle, request_id) if request_id else str(uuid.uuid4())
        rec, _ = self.host.record(handle)
        if request_id:
            known = s.ops.get(op_id)
            if known is not None:  # the same request again, maybe still being recorded
                if known.logged is not None:
                    await asyncio.wait([known.logged])
                if s.ops.get(op_id) is known:
                    return op_id
                raise ApiError(503, "the statement could not be recorded; retry",
                               headers={"Retry-After": "1"})
            if op_id in rec.ops:  # started on the session's last peer: adopted on fetch
                return op_id
        if len(s.ops) >= MAX_OPS_PER_SESSION:
            self._forget_old_ops(s)
        op = Operation(op_id, statement, kind)
        # recorded for the session's next holder; a read runs meanwhile, a statement
        # that changes something only once it is recorded (never twice after a 503)
        answers_ok = flink is not None and flink.answers_ok
        op.record = SqlOperation(handle, op.id, self.node, s.epoch, statement, op.kind,
                                 time.time(), config=config, answers_ok=answers_ok)
        s.ops[op.id] = op
        if answers_ok:
            self.flink_ok.add(op.id)
        if op.kind == READ:
            op.task = asyncio.create_task(self._run(s, op, config))
            if defer_read:
                return op.id
        await self._record(s, op)
        if op.task is None and op.status == RUNNING:
            op.task = asyncio.create_task(self._run(s, op, config))
        return op.id

    async def _record(self, s: LocalSession, op: Operation) -> None:
        """The operation written in the session's record (once); if it cannot be, it is
        stopped and forgotten and the request answered 503 (retry). An adopted one (from
        the record) has nothing to write."""
        if op.record is None:
            return
        if op.logged is None:
            op.logged = asyncio.ensure_future(self.ops_log.submit(op.record))
        try:
            res = await asyncio.shield(op.logged)
        except RaftUnavailable as exc:
            res = None
            error = str(exc)
        if res is None or not res.ok:
            await self._stop(op)
            s.ops.pop(op.id, None)
            self.flink_ok.discard(op.id)
            if res is not None and res.code == "stale":
                raise ApiError(503, f"session {s.handle} is moving to another peer; retry",
                               headers={"Retry-After": "1"})
            raise ApiError(503, f"the statement could not be recorded: "
                                f"{error if res is None else res.error}; retry",
                           headers={"Retry-After": "1"})

    async def execute_first(self, handle: str, body: dict, forwarded: bool,
                            request_id: str, row_format: str,
                            wait: Optional[float] = None) -> tuple[str, ResultPage]:
        """Start a statement and answer with its first page too (waiting for it up to
        `wait` s, or sql-gateway.fetch-wait; not ready: ask for token 0), `end` when it
        holds every row: one round trip for a short query. A read whose rows all come in
        that answer is never recorded in the session (nothing of it is left to fetch; the
        same request again, on any peer, runs it again); one that goes on is, before the
        answer."""
        if row_format not in ROW_FORMATS:
            raise ApiError(400, f"rowFormat {row_format!r} is not supported (JSON, PLAIN_TEXT)")
        op_id = await self.execute(handle, body, forwarded, request_id, defer_read=True)
        s, op = self._op(handle, op_id, forwarded)
        await self._until_done(op, wait)
        whole = op.done.is_set() and op.status == FINISHED and op.eos
        if op.kind == READ and not whole and not (op.done.is_set() and op.status == ERROR):
            await self._record(s, op)
        if not op.done.is_set():  # (its wait is over: not another one in fetch)
            return op_id, ResultPage(0, ready=False, is_query=op.kind == READ)
        page = await self.fetch(handle, op_id, 0, row_format, forwarded)
        if page.ready and op.eos and op.served == 0:
            page = replace(page, end=True)
        return op_id, page

    async def _until_done(self, op: Operation, wait: Optional[float] = None) -> bool:
        """Whether the operation ended within `wait` s (None: sql-gateway.fetch-wait)."""
        if not op.done.is_set():
            try:
                await asyncio.wait_for(asyncio.shield(op.done.wait()),
                                       self.conf["sql-gateway.fetch-wait"]
                                       if wait is None else wait)
            except asyncio.TimeoutError:
                return False
        return True

    def _statement(self, body: dict) -> tuple[str, dict, Optional[flinksql.Translation]]:
        """The request's statement, checked, in Spark's syntax (Flink's SET 'k' = 'v' and
        RESET 'k' translated: run and recorded so, so the replay on the session's next
        peer runs Spark's syntax), its executionConfig, and the translation if any."""
        statement = body.get("statement")
        config = body.get("executionConfig") or {}
        if not isinstance(statement, str) or not statement.strip():
            raise ApiError(400, "statement must be a non-empty string")
        if not isinstance(config, dict):
            raise ApiError(400, "executionConfig must be an object")
        if statement.lstrip().startswith(connectplan.MARKER):  # (only a replay runs it)
            raise ApiError(400, f"a statement may not start with {connectplan.MARKER!r}: "
                                "it is reserved for recorded session state")
        flink = flinksql.translate(statement)
        if flink is not None:
            statement = flink.statement
        size, most = len(statement.encode("utf-8", "replace")), self.max_statement_size
        if size > most:
            raise ApiError(413, f"the statement is {size} bytes, more than "
                                f"sql-gateway.max-statement-size ({most} bytes)")
        return statement, {str(k): str(v) for k, v in config.items()}, flink

    def _forget_old_ops(self, s: LocalSession) -> None:
        for op_id in [i for i, op in s.ops.items() if op.status != RUNNING][:len(s.ops) // 2]:
            s.ops.pop(op_id, None)

    async def _run(self, s: LocalSession, op: Operation, config: dict) -> None:
        answers_ok = op.id in self.flink_ok
        self.flink_ok.discard(op.id)
        try:
            await self.host.open(s.handle)
            op.worker = s.worker
            page = await op.worker.call(P.Execute(s.handle, op.id, op.statement, config,
                                                  self.conf["sql-gateway.page-rows"]))
            if op.kind == STATE:
                res = await self.host.commit(AddSqlStatement(s.handle, self.node, s.epoch,
                                                             op.statement, time.time(), op.id))
                if not res.ok:
                    raise StatementError(f"the statement ran but the session could not "
                                         f"keep it: {res.error}")
            if answers_ok:  # Flink's answer to a SET of a key or a RESET: one row, OK
                page = {"schema": flinksql.OK_SCHEMA, "rows": flinksql.OK_ROWS, "eos": True}
            op.columns, op.schema = sqlresult.columns(page.get("schema")), page.get("schema")
            op.has_content = bool(op.columns) and (bool(page["rows"]) or op.kind == READ) \
                and not answers_ok
            op.page, op.eos = page, bool(page.get("eos"))
            await self._ended(s, op, FINISHED)
            op.update_state(FINISHED)
        except asyncio.CancelledError:
            op.update_state(CANCELED)
            raise
        except (StatementError, WorkerLost, ApiError) as exc:
            # the whole text (Spark's stack) here, in the peer's log, and second in the
            # error answer's list; its first line is Spark's error class and message
            log.info("SQL operation %s of session %s failed: %s", op.id, s.handle,
                     _message(exc))
            await self._ended(s, op, ERROR, _message(exc))
            op.update_state(ERROR, _message(exc))
        except Exception as exc:
            log.exception("SQL operation %s failed", op.id)
            op.update_state(ERROR, f"{type(exc).__name__}: {exc}")
        finally:
            op.done.set()

    async def _ended(self, s: LocalSession, op: Operation, status: OpStatus,
                     error: str = "") -> None:
        """A write's end, recorded before the client can see it: the session's next
        holder answers it from the record (never runs it again). Best effort: if the
        record cannot be written, the next holder says it may or may not have run."""
        if op.kind != WRITE or op.status != RUNNING:
            return
        try:
            res = await self.ops_log.submit(SqlOperation(
                s.handle, op.id, self.node, s.epoch, "", op.kind, time.time(),
                status.value, error))
        except RaftUnavailable as exc:
            log.warning("the end of SQL operation %s was not recorded: %s", op.id, exc)
            return
        if not res.ok:
            log.warning("the end of SQL operation %s was not recorded: %s", op.id, res.error)

    def _op(self, handle: str, op_id: str, forwarded: bool) -> tuple[LocalSession, Operation]:
        s = self.host.held(handle, forwarded)
        op = s.ops.get(op_id)
        if op is None:
            op = self._adopt(s, op_id)
        if op is None:
            raise ApiError(404, f"operation {op_id} does not exist in session {handle}")
        return s, op

    def _adopt(self, s: LocalSession, op_id: str) -> Optional[Operation]:
        """An operation this peer does not know but the session's record does: its peer
        died (or restarted) while the client still wanted it (jm/policy/sql/sqlop.py
        `adoption`): a read (or a session-defining statement not kept yet) runs again
        here; one that ended is answered from the record; a write that had not ended is
        an error that says it may or may not have run."""
        with self.raft.read() as st:
            rec = st.sessions.get(s.handle)
            known = dict(rec.ops.get(op_id) or {}) if rec is not None else {}
        if not known:
            return None
        op = Operation(op_id, known.get("statement") or "", known.get("kind") or WRITE)
        s.ops[op_id] = op
        then = adoption(known)
        if then.rerun:
            log.info("SQL operation %s of session %s runs again here (its peer %s is gone)",
                     op_id, s.handle, known.get("node"))
            op.rerun = True
            if known.get("answers_ok"):  # a Flink SET/RESET: answered OK there as here
                self.flink_ok.add(op_id)
            op.task = asyncio.create_task(self._run(s, op, dict(known.get("config") or {})))
        else:
            op.eos = True
            op.update_state(then.state.status, then.state.error)
            op.done.set()
        return op

    def status(self, handle: str, op_id: str, forwarded: bool) -> str:
        _, op = self._op(handle, op_id, forwarded)
        return op.status.value

    async def cancel(self, handle: str, op_id: str, forwarded: bool) -> str:
        _, op = self._op(handle, op_id, forwarded)
        await self._stop(op)
        return op.status.value

    async def _stop(self, op: Operation) -> None:
        if op.update_state(CANCELED):  # (only a running one)
            if op.worker is not None and op.worker.alive:
                await self.host.quiet(op.worker, P.Cancel(op.id))
            if op.task is not None:
                op.task.cancel()

    async def close_operation(self, handle: str, op_id: str, forwarded: bool) -> str:
        s, op = self._op(handle, op_id, forwarded)
        await self.cancel(handle, op_id, forwarded)
        s.ops.pop(op_id, None)
        if op.worker is not None and op.worker.alive and not op.eos:
            asyncio.ensure_future(self.host.quiet(op.worker, P.CloseOperation(op.id)))
        op.update_state(CLOSED)
        return CLOSED.value

    async def fetch(self, handle: str, op_id: str, token: int, row_format: str,
                    forwarded: bool) -> ResultPage:
        s, op = self._op(handle, op_id, forwarded)
        if row_format not in ROW_FORMATS:
            raise ApiError(400, f"rowFormat {row_format!r} is not supported (JSON, PLAIN_TEXT)")
        if not await self._until_done(op):
            return ResultPage(token, ready=False, is_query=op.kind == READ)
        if op.status == ERROR:
            raise ApiError(400, *sparkerror.errors(op.error or "the statement failed"))
        if op.status in (CANCELED, CLOSED):
            raise ApiError(409, f"operation {op_id} was {op.status.value.lower()}")
        async with op.lock:
            while op.rerun and token > op.served + 1:  # pages the client had read already
                if op.served >= 0:
                    await self._advance(op)
                op.served += 1
            if token == op.served + 1:
                if token > 0:
                    await self._advance(op)
                op.served = token
            elif token != op.served:
                raise ApiError(400, f"result token {token} is out of order: the next one is "
                                    f"{op.served + 1} (or {op.served} again)")
            page = op.page or {"rows": []}
        return ResultPage(token, ready=True, is_query=op.kind == READ,
                          has_content=op.has_content, columns=tuple(op.columns),
                          rows=tuple(page.get("rows") or ()), end=bool(page.get("end")))

    async def _advance(self, op: Operation) -> None:
        """The operation's next page (after the last one: the end)."""
        if op.eos:
            op.page = {"rows": [], "eos": True, "end": True}
        else:
            op.page = await self._next_page(op)
            op.eos = bool(op.page.get("eos"))

    async def _next_page(self, op: Operation) -> dict:
        try:
            if op.worker is None:
                raise WorkerLost("the statement has no SQL worker")
            return await op.worker.call(P.Fetch(op.id, self.conf["sql-gateway.page-rows"]))
        except (StatementError, WorkerLost) as exc:
            op.update_state(ERROR, _message(exc))
            raise ApiError(400, *sparkerror.errors(_message(exc)))


async def _classify(statement: str, defining: list) -> str:
    """The statement's kind (jm/policy/sql/sqlparse.py; the session's temporary views read
    only for a DROP VIEW), off the event loop when the text is long."""
    def run() -> str:
        return classify(statement, lambda: temp_views(defining))
    if len(statement) + sum(len(str(d)) for d in defining) > CLASSIFY_INLINE:
        return await asyncio.to_thread(run)
    return run()


def _message(exc: BaseException) -> str:
    if isinstance(exc, ApiError):
        return "; ".join(exc.errors)
    return str(exc)
