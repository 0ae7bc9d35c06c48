"""The SQL gateway of a peer (Flink SQL Gateway's REST API, rest/sql.py): sessions placed
on peers like jobs, each a Spark Connect session in its peer's SQL worker, and their
operations.

What is replicated (raft/sessions.py): which peer holds each session and the
statements that define its state (SET, USE, temporary views...), so that another peer
can rebuild it. What is not: operations and their rows, which live on the holder only;
a statement costs no Raft round trip unless it defines session state.

A request for a session held by another peer raises `Forward` with that peer's URL
(rest/sql.py proxies it); a session unknown to the replicated state is a 404.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from typing import Any, Optional

from jm.cluster.batcher import Batcher
from jm.cluster.sqlops import LocalSession, Operation
from jm.cluster.waits import wait_event
from jm.policy.sqlop import OpStatus
from jm.policy.sqlstmt import READ, STATE, WRITE, classify, temp_views
from jm.runtime import sqlproto as P
from jm.runtime.sqlclient import SqlWorker, StatementError, WorkerLost
from jm.wire import sqlresult
from raft import sessions as S
from raft.commands import (AddSqlStatement, CloseSqlSessions, OpenSqlSession, SqlOperation,
                           StartSqlOperations)
from raft.node import RaftUnavailable
from rest.gateway import ROW_FORMATS, ApiError, Forward, ResultPage, SessionInfo, UnknownSession

log = logging.getLogger("jm.sql")

RUNNING, FINISHED, ERROR = OpStatus.RUNNING, OpStatus.FINISHED, OpStatus.ERROR
CANCELED, CLOSED = OpStatus.CANCELED, OpStatus.CLOSED
MAX_OPS_PER_SESSION = 1000
MAX_PROPERTIES_SIZE = 64 * 1024  # bytes of a session's name and properties
CLASSIFY_INLINE = 16 * 1024  # characters classified on the event loop; more in a thread
LOST_WRITE = ("the peer running this statement died while it ran, so it may or may not have "
              "taken effect; check, and run it again if needed (the session goes on)")


class SqlGateway:
    def __init__(self, peer: Any) -> None:
        self.peer = peer
        self.node = peer.node
        self.conf = peer.conf
        self.local: dict[str, LocalSession] = {}
        self.worker: Optional[SqlWorker] = None
        self._task: Optional[asyncio.Task] = None
        self._wake: Optional[asyncio.Event] = None
        self.ops_log: Optional[Batcher] = None  # operations, for the session's next holder
        # idle expiry counts on this host's monotonic clock, from the last request this
        # peer served (never from a time another peer stamped), so a wall clock step does
        # not close sessions early or keep them late; time.time() only stamps commands
        self.clock = time.monotonic

    # ---- lifecycle --------------------------------------------------------------------
    def start(self) -> None:
        self._wake = self.peer.raft.subscribe()
        self._task = asyncio.create_task(self._loop())
        self.ops_log = Batcher(self.peer.raft, StartSqlOperations,
                               self.conf["rest.write-timeout"], retry=False)
        self.ops_log.start()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=5)
        if self.ops_log is not None:
            await self.ops_log.close()
        for s in self.local.values():
            for op in s.ops.values():
                if op.task is not None:
                    op.task.cancel()
        if self.worker is not None:
            await self.worker.close()

    def _worker(self) -> SqlWorker:
        remote = self.peer.spark_remote()
        if not remote:
            raise ApiError(503, "this peer has no Spark Connect server (spark.connect.embedded "
                                "is false and spark.remote is unset)")
        if self.worker is None:
            self.worker = SqlWorker(remote, self.conf["sql-gateway.worker-threads"],
                                    os.path.join(self.peer.log_dir, "sql-worker.log"),
                                    self.conf["jobmanager.executor.nice"],
                                    on_start=lambda pid: self.peer.guard("sql-worker", pid),
                                    env_pass=self.conf["jobmanager.executor.env-pass"],
                                    env_add=self.peer.child_env)
        return self.worker

    async def _loop(self) -> None:
        """Follow the replicated sessions (new ones here are opened ahead of their first
        statement; moved or closed ones are let go) and expire idle ones."""
        while True:
            await wait_event(self._wake, 2.0)
            self._wake.clear()
            try:
                await self._reconcile()
            except Exception:
                log.exception("SQL sessions reconcile failed")

    async def _reconcile(self) -> None:
        now = self.clock()
        with self.peer.raft.read() as st:
            mine = {h: s.epoch for h, s in st.sessions.items() if s.node == self.node}
        for handle, s in list(self.local.items()):
            if mine.get(handle) != s.epoch:
                self._drop_local(handle, release=handle not in mine)
        for handle, epoch in mine.items():
            if handle not in self.local:
                self.local[handle] = LocalSession(handle, epoch, now)
                if self.peer.lease_valid() and self.peer.spark_remote():
                    asyncio.ensure_future(self._open_quietly(handle))
        idle = self.conf["sql-gateway.session.idle-timeout"]
        expired = tuple(h for h, s in self.local.items()
                        if now - s.last_access > idle
                        and not any(op.status == RUNNING for op in s.ops.values()))
        if expired and self.peer.lease_valid():
            log.info("closing %d idle SQL session(s)", len(expired))
            await self._commit(CloseSqlSessions(expired, time.time(), "idle"))

    def _drop_local(self, handle: str, release: bool) -> None:
        s = self.local.pop(handle, None)
        if s is None:
            return
        for op in s.ops.values():
            if op.task is not None and not op.task.done():
                op.task.cancel()
        if self.worker is not None and self.worker.alive and s.generation:
            asyncio.ensure_future(self._quiet(P.CloseSession(handle, release)))

    async def _quiet(self, message: Any) -> None:
        try:
            await self.worker.call(message, timeout=30)
        except Exception:
            pass

    async def _open_quietly(self, handle: str) -> None:
        try:
            await self._ensure_open(handle)
        except Exception as exc:
            log.warning("opening SQL session %s ahead of use failed: %s", handle, exc)

    async def _ensure_open(self, handle: str) -> LocalSession:
        s = self.local.get(handle)
        if s is None:
            raise ApiError(404, f"session {handle} does not exist")
        worker = self._worker()
        if (s.generation and s.generation == worker.generation and worker.alive
                and s.server == self._server_generation()):
            return s
        if s.opening is None or s.opening.done():
            s.opening = asyncio.ensure_future(self._open(s, worker))
        await asyncio.shield(s.opening)
        return s

    def _server_generation(self) -> int:
        """The peer's Spark Connect server restarts lose its sessions: they are rebuilt."""
        return self.peer.spark.generation if self.peer.spark is not None else 0

    async def _open(self, s: LocalSession, worker: SqlWorker) -> None:
        server = self._server_generation()
        if s.generation == worker.generation and worker.alive:  # open in a lost server
            await worker.call(P.CloseSession(s.handle, release=False))
        with self.peer.raft.read() as st:
            rec = st.sessions.get(s.handle)
            if rec is None:
                raise ApiError(404, f"session {s.handle} does not exist")
            props, replay = dict(rec.properties), tuple(rec.statements)
        res = await worker.call(P.OpenSession(s.handle, props, replay))
        s.generation, s.server = worker.generation, server
        if res.get("errors"):
            log.warning("SQL session %s rebuilt with errors: %s", s.handle, res["errors"])

    async def _commit(self, command: Any) -> Any:
        try:
            res = await self.peer.raft.submit(command, self.conf["rest.write-timeout"])
        except RaftUnavailable as exc:
            raise ApiError(503, str(exc), headers={"Retry-After": "1"})
        return res

    # ---- where a session is -----------------------------------------------------------
    def _record(self, handle: str):
        with self.peer.raft.read() as st:
            rec = st.sessions.get(handle)
            if rec is None:
                raise UnknownSession(404, f"session {handle} does not exist (closed, expired or "
                                    "never opened)")
            peer = st.peers.get(rec.node) if rec.node else None
            return rec, (self.peer.url_of(peer.host, peer.rest_port) if peer else None)

    def _held_here(self, handle: str, forwarded: bool) -> LocalSession:
        rec, url = self._record(handle)
        if rec.node != self.node:
            if url is None or forwarded:
                raise ApiError(503, f"session {handle} is moving to another peer; retry",
                               headers={"Retry-After": "1"})
            raise Forward(url)
        s = self.local.get(handle)
        if s is None or s.epoch != rec.epoch:  # applied here, not reconciled yet
            s = self.local[handle] = LocalSession(handle, rec.epoch, self.clock())
        s.last_access = self.clock()
        return s

    def move_wait(self) -> float:
        """A dead holder's sessions move `heartbeat.timeout` after its last heartbeat (a
        new leader may take a Raft election more): wait that long and a little more."""
        return min(self.conf["heartbeat.timeout"] + 2.0, 10.0)

    async def catch_up(self) -> None:
        """Until this replica has applied everything committed before now (one Raft
        barrier): a session opened through another peer an instant ago is known here."""
        try:
            await self.peer.raft.barrier(self.conf["rest.write-timeout"])
        except RaftUnavailable as exc:
            raise ApiError(503, str(exc), headers={"Retry-After": "1"})

    def proxy_read_timeout(self) -> float:
        """How long a request proxied to a session's holder may go without an answer: a
        holder's longest wait (a fetch waiting for rows, a statement being recorded in
        Raft) and a heartbeat timeout more. A frozen holder does not hold the request
        for longer; the request then waits for the session to move (rest/sql.py)."""
        return (self.conf["sql-gateway.fetch-wait"] + self.conf["rest.write-timeout"]
                + self.conf["heartbeat.timeout"])

    async def wait_moved(self, handle: str, holder_url: str, deadline: float) -> bool:
        loop = asyncio.get_running_loop()
        while True:
            try:
                _, url = self._record(handle)
            except ApiError:
                return True  # closed meanwhile: the request's answer is a 404 now
            if url != holder_url:
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.05)

    # ---- sessions -----------------------------------------------------------------------
    async def open_session(self, body: dict) -> dict:
        props = body.get("properties") or {}
        name = body.get("sessionName") or ""
        if not isinstance(props, dict) or not all(isinstance(k, str) for k in props):
            raise ApiError(400, "properties must be an object of string keys")
        if not isinstance(name, str):
            raise ApiError(400, "sessionName must be a string")
        props = {k: str(v) for k, v in props.items()}
        size = sum(len(k.encode("utf-8", "replace")) + len(v.encode("utf-8", "replace"))
                   for k, v in props.items()) + len(name.encode("utf-8", "replace"))
        if size > MAX_PROPERTIES_SIZE:  # (kept in the replicated state, sent to each holder)
            raise ApiError(413, f"the session's name and properties are {size} bytes, more "
                                f"than {MAX_PROPERTIES_SIZE}")
        limit = self.conf["sql-gateway.max-sessions"]
        handle = str(uuid.uuid4())
        with self.peer.raft.read() as st:
            counts = S.session_counts(st)
            ready = {p.id for p in st.alive_peers() if not p.draining and p.ready}
        room = [n for n in counts if n in ready and (limit <= 0 or counts[n] < limit)]
        if not room:
            raise ApiError(503, "every peer holds sql-gateway.max-sessions sessions (or none "
                                "is ready); retry later", headers={"Retry-After": "2"})
        node = min(room, key=lambda n: (counts[n], n != self.node, n))
        res = await self._commit(OpenSqlSession(handle, name, props, node, time.time(), limit))
        if not res.ok:
            raise ApiError(503 if res.code in ("full", "unavailable") else 400, res.error,
                           headers={"Retry-After": "1"})
        return handle

    def session_info(self, handle: str) -> SessionInfo:
        rec, url = self._record(handle)
        return SessionInfo(dict(rec.properties), rec.name, rec.node, url, len(rec.statements),
                           rec.moves)

    async def heartbeat(self, handle: str, forwarded: bool) -> None:
        self._held_here(handle, forwarded)

    async def close_session(self, handle: str) -> str:
        self._record(handle)
        res = await self._commit(CloseSqlSessions((handle,), time.time(), "closed"))
        if not res.ok:
            raise ApiError(400, res.error)
        return CLOSED.value

    # ---- operations ---------------------------------------------------------------------
    async def execute(self, handle: str, body: dict, forwarded: bool,
                      request_id: str = "") -> str:
        """Start a statement; its operation's handle. With a request id (X-Request-Id)
        the handle is derived from it: a retried request (an answer lost on the way) gets
        the same operation, the statement runs once."""
        statement = body.get("statement")
        config = body.get("executionConfig") or {}
        if not isinstance(statement, str) or not statement.strip():
            raise ApiError(400, "statement must be a non-empty string")
        if not isinstance(config, dict):
            raise ApiError(400, "executionConfig must be an object")
        size, most = len(statement.encode("utf-8", "replace")), \
            self.conf["sql-gateway.max-statement-size"]
        if size > most:
            raise ApiError(413, f"the statement is {size} bytes, more than "
                                f"sql-gateway.max-statement-size ({most} bytes)")
        self._held_here(handle, forwarded)
        # (before the checks below, which must not be split by a wait: two tries of one
        # request at once would both start it)
        kind = await _classify(statement, list(self._record(handle)[0].statements))
        s = self._held_here(handle, forwarded)
        if not self.peer.lease_valid():
            raise ApiError(503, "this peer has lost its lease; retry", headers={"Retry-After": "1"})
        self._worker()
        op_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{handle}/{request_id}")) if request_id \
            else str(uuid.uuid4())
        rec, _ = self._record(handle)
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
        config = {str(k): str(v) for k, v in config.items()}
        # recorded for the session's next holder; a read runs meanwhile, a statement
        # that changes something only once it is recorded (never twice after a 503)
        op.logged = asyncio.ensure_future(self.ops_log.submit(SqlOperation(
            handle, op.id, self.node, s.epoch, statement, op.kind, time.time())))
        s.ops[op.id] = op
        if op.kind == READ:
            op.task = asyncio.create_task(self._run(s, op, config))
        try:
            res = await asyncio.shield(op.logged)
        except RaftUnavailable as exc:
            res = None
            error = str(exc)
        if res is None or not res.ok:
            await self._stop(op)
            s.ops.pop(op.id, None)
            if res is not None and res.code == "stale":
                raise ApiError(503, f"session {handle} is moving to another peer; retry",
                               headers={"Retry-After": "1"})
            raise ApiError(503, f"the statement could not be recorded: "
                                f"{error if res is None else res.error}; retry",
                           headers={"Retry-After": "1"})
        if op.task is None and op.status == RUNNING:
            op.task = asyncio.create_task(self._run(s, op, config))
        return op.id

    def _forget_old_ops(self, s: LocalSession) -> None:
        for op_id in [i for i, op in s.ops.items() if op.status != RUNNING][:len(s.ops) // 2]:
            s.ops.pop(op_id, None)

    async def _run(self, s: LocalSession, op: Operation, config: dict) -> None:
        try:
            await self._ensure_open(s.handle)
            page = await self.worker.call(P.Execute(s.handle, op.id, op.statement, config,
                                                    self.conf["sql-gateway.page-rows"]))
            if op.kind == STATE:
                res = await self._commit(AddSqlStatement(s.handle, self.node, s.epoch,
                                                         op.statement, time.time()))
                if not res.ok:
                    raise StatementError(f"the statement ran but the session could not "
                                         f"keep it: {res.error}")
            op.columns = sqlresult.columns(page.get("schema"))
            op.has_content = bool(op.columns) and (bool(page["rows"]) or op.kind == READ)
            op.page, op.eos = page, bool(page.get("eos"))
            op.update_state(FINISHED)
        except asyncio.CancelledError:
            op.update_state(CANCELED)
            raise
        except (StatementError, WorkerLost, ApiError) as exc:
            op.update_state(ERROR, _message(exc))
        except Exception as exc:
            log.exception("SQL operation %s failed", op.id)
            op.update_state(ERROR, f"{type(exc).__name__}: {exc}")
        finally:
            op.done.set()

    def _op(self, handle: str, op_id: str, forwarded: bool) -> tuple[LocalSession, Operation]:
        s = self._held_here(handle, forwarded)
        op = s.ops.get(op_id)
        if op is None:
            op = self._adopt(s, op_id)
        if op is None:
            raise ApiError(404, f"operation {op_id} does not exist in session {handle}")
        return s, op

    def _adopt(self, s: LocalSession, op_id: str) -> Optional[Operation]:
        """An operation this peer does not know but the session's record does: its peer
        died (or restarted) while the client still wanted it. A read (or a statement
        that only defines the session) runs again here; a write is an error that says
        it may or may not have run."""
        with self.peer.raft.read() as st:
            rec = st.sessions.get(s.handle)
            known = dict(rec.ops.get(op_id) or {}) if rec is not None else {}
        if not known:
            return None
        op = Operation(op_id, known.get("statement") or "", known.get("kind") or WRITE)
        s.ops[op_id] = op
        if op.kind in (READ, STATE) and known.get("statement"):
            log.info("SQL operation %s of session %s runs again here (its peer %s is gone)",
                     op_id, s.handle, known.get("node"))
            op.rerun = True
            op.task = asyncio.create_task(self._run(s, op, {}))
        else:
            op.update_state(ERROR, LOST_WRITE)
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
            if self.worker is not None and self.worker.alive:
                await self._quiet(P.Cancel(op.id))
            if op.task is not None:
                op.task.cancel()

    async def close_operation(self, handle: str, op_id: str, forwarded: bool) -> str:
        s, op = self._op(handle, op_id, forwarded)
        await self.cancel(handle, op_id, forwarded)
        s.ops.pop(op_id, None)
        if self.worker is not None and self.worker.alive and not op.eos:
            asyncio.ensure_future(self._quiet(P.CloseOperation(op.id)))
        op.update_state(CLOSED)
        return CLOSED.value

    async def fetch(self, handle: str, op_id: str, token: int, row_format: str,
                    forwarded: bool) -> ResultPage:
        s, op = self._op(handle, op_id, forwarded)
        if row_format not in ROW_FORMATS:
            raise ApiError(400, f"rowFormat {row_format!r} is not supported (JSON, PLAIN_TEXT)")
        if not op.done.is_set():
            try:
                await asyncio.wait_for(asyncio.shield(op.done.wait()),
                                       self.conf["sql-gateway.fetch-wait"])
            except asyncio.TimeoutError:
                return ResultPage(token, ready=False, is_query=op.kind == READ)
        if op.status == ERROR:
            raise ApiError(400, op.error or "the statement failed")
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
            return await self.worker.call(P.Fetch(op.id, self.conf["sql-gateway.page-rows"]))
        except (StatementError, WorkerLost) as exc:
            op.update_state(ERROR, _message(exc))
            raise ApiError(400, _message(exc))


async def _classify(statement: str, defining: list) -> str:
    """The statement's kind (jm/policy/sqlstmt.py), off the event loop when the text is
    long: classifying takes about a second per megabyte."""
    def run() -> str:
        return classify(statement, temp_views(defining))
    if len(statement) + sum(len(str(d)) for d in defining) > CLASSIFY_INLINE:
        return await asyncio.to_thread(run)
    return run()


def _message(exc: BaseException) -> str:
    if isinstance(exc, ApiError):
        return "; ".join(exc.errors)
    return str(exc)
