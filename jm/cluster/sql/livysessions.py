"""Apache Livy's interactive sessions on a peer (rest/livy.py's /sessions): what a client
asks of any peer. The sessions are SQL gateway sessions (jm/cluster/sql/sqlsessions.py) with
a Livy record (raft/livy.py), so they are placed, moved when their peer dies and rebuilt
there as SQL sessions are. Statements are numbered in the replicated state and run by
the session's holder (jm/cluster/sql/livyrunner.py); any peer answers a session, its
statements and their outputs from its replica. A new statement and a cancel go to the
holder (rest/sql.py's proxying: `Forward`)."""
from __future__ import annotations

import time
import uuid
from typing import Optional

from jm.cluster.sql.livyrunner import LivyRunner
from jm.cluster.sql.sqlservices import SqlServices
from jm.cluster.sql.sessionhost import SessionHost, check_deps
from jm.cluster.sql.sqlsessions import SqlSessions, check_properties_size
from jm.cluster.sql.sqlstatements import SqlStatements
from jm.policy.api.tenancy import tenant_for
from jm.policy.jobs.spec import proxy_refusal
from jm.wire import livysessions as W
from raft import livy as L
from raft.livy import StatementState
from raft import tenants as T
from raft.commands import (AddLivyStatement, CloseSqlSessions, EndLivyStatement,
                           OpenLivySession)
from jm.api import ANYONE, ApiError, Credential, UnknownSession


class LivySessions:
    def __init__(self, svc: SqlServices, host: SessionHost, sessions: SqlSessions,
                 statements: SqlStatements) -> None:
        self.svc, self.host, self.sql_sessions = svc, host, sessions
        self.raft, self.node = svc.raft, svc.node
        self.runner = LivyRunner(svc, host, statements)

    def start(self) -> None:
        self.runner.start()

    async def close(self) -> None:
        await self.runner.close()

    @staticmethod
    def is_livy_request(body) -> bool:
        return W.is_livy_request(body)

    # ---- reads: any peer, from its replica ----------------------------------------------
    def _read(self, number: int):
        """(SQL session record, LivyRecord) of session `number`; UnknownSession if none."""
        with self.raft.read() as st:
            s, livy = L.session_of(st, number)
            if livy is None:
                raise UnknownSession(404, f"session {number} not found (deleted, expired "
                                          "or never created)")
            return s, livy

    def handle_of(self, number: int) -> str:
        return self._read(number)[0].handle

    def _log(self, s, livy) -> list:
        with self.raft.read() as st:
            peer = st.peers.get(s.node) if s.node else None
        where = f"peer {s.node} ({self.svc.url_of(peer.host, peer.rest_port)})" if peer \
            else "no peer yet (waiting for one)"
        lines = list(livy.notes) + [f"session {livy.id} ({livy.kind}) runs on {where}"]
        if s.moves:
            lines.append(f"moved {s.moves} time(s) after its peer died; Python variables "
                         "were lost each time, temporary views and Spark settings restored")
        return lines

    # (each answer is made under the state's lock: the records change as Raft applies)
    def session(self, number: int) -> dict:
        with self.raft.read():
            s, livy = self._read(number)
            return W.session_json(livy, s.name, self._log(s, livy), s.node)

    def sessions(self, start: int, size: int, who: Credential = ANYONE) -> dict:
        with self.raft.read() as st:
            found = [L.session_of(st, n) for n in sorted(st.livy_ids)]
            found = [(s, livy) for s, livy in found
                     if livy is not None and who.may_see(s.tenant)]
            return {"from": start, "total": len(found),
                    "sessions": [W.session_json(livy, s.name, peer=s.node) for s, livy in
                                 found[start:start + size]]}

    def log(self, number: int, start: Optional[int], size: Optional[int]) -> dict:
        from jm.wire.livy import log_page
        with self.raft.read():
            s, livy = self._read(number)
            lines = self._log(s, livy)
        first, total, lines = log_page("\n".join(lines), start, size)
        return {"id": number, "from": first, "total": total, "log": lines}

    def statements(self, number: int, start: int = 0, size: int = 1000) -> dict:
        cancelling = self.runner.cancelling(number)
        with self.raft.read():
            _, livy = self._read(number)
            states = W.statement_states(livy)
            return {"total_statements": len(livy.statements),
                    "statements": [W.statement_json(st, states[st.id], st.id in cancelling)
                                   for st in livy.statements[start:start + size]]}

    def statement(self, number: int, statement: int) -> dict:
        cancelling = self.runner.cancelling(number)
        with self.raft.read():
            _, livy = self._read(number)
            st = L.find_statement(livy, statement)
            if st is None:
                raise ApiError(404, f"statement {statement} not found in session {number}")
            return W.statement_json(st, W.statement_states(livy)[st.id], st.id in cancelling)

    # ---- changes --------------------------------------------------------------------------
    async def open(self, body, who: Credential = ANYONE) -> dict:
        try:
            req = W.session_request(body)
        except ValueError as exc:
            raise ApiError(400, *exc.args[0])
        check_properties_size(req.conf, req.name, req.proxy_user or "")
        check_deps(req.conf)
        tenant = tenant_for(who, None)
        with self.raft.read() as st:
            granted = T.proxy_users(st, tenant)
        refused = req.proxy_user and proxy_refusal(
            req.proxy_user, self.svc.conf.executor.proxy_users, "proxyUser",
            "sessions", tenant, granted)
        if refused:
            raise ApiError(403, refused)
        node, limit = self.sql_sessions.place()
        value = await self.sql_sessions.open_checked(OpenLivySession(
            str(uuid.uuid4()), req.kind, req.name, req.conf, node, time.time(), limit,
            req.notes, tenant, who.name, req.proxy_user))
        return self.session(value["id"])

    async def delete(self, number: int) -> dict:
        s, _ = self._read(number)
        res = await self.host.commit(CloseSqlSessions((s.handle,), time.time(), "closed"))
        if not res.ok:
            raise ApiError(400, res.error)
        return {"msg": "deleted"}

    async def submit(self, number: int, body, forwarded: bool, request_id: str) -> dict:
        """POST /sessions/{id}/statements, on the session's holder (else Forward)."""
        s, livy = self._read(number)
        try:
            code, kind = W.statement_request(body, livy.kind)
        except ValueError as exc:
            raise ApiError(400, *exc.args[0])
        local = self.host.held(s.handle, forwarded)
        most = self.svc.conf["sql-gateway.livy-session.max-waiting-statements"]
        again = bool(request_id) and any(st.request_id == request_id for st in livy.statements)
        waiting = sum(1 for st in livy.statements if not st.state)
        if most and not again and waiting >= most:  # (most 0: no limit)
            raise ApiError(429, f"session {number} has {waiting} statements waiting or "
                                "running, its limit (sql-gateway.livy-session."
                                "max-waiting-statements); send more once they end",
                           headers={"Retry-After": "5"})
        res = await self.host.commit(AddLivyStatement(number, self.node, local.epoch, code,
                                                      kind, time.time(), request_id))
        if not res.ok:
            raise ApiError(503 if res.code == "stale" else 400, res.error,
                           headers={"Retry-After": "1"})
        self.runner.wake()
        return self.statement(number, res.value)

    async def cancel(self, number: int, statement: int, forwarded: bool) -> dict:
        """POST .../statements/{n}/cancel, on the holder: a waiting statement is cancelled
        at once, a running one stopped (its runner records it cancelled)."""
        s, livy = self._read(number)
        st = L.find_statement(livy, statement)
        if st is None:
            raise ApiError(404, f"statement {statement} not found in session {number}")
        local = self.host.held(s.handle, forwarded)
        if st.state:
            return {"msg": "canceled"}
        if not await self.runner.cancel(number, statement):  # not started: never will
            await self.host.commit(EndLivyStatement(
                number, statement, self.node, local.epoch, StatementState.CANCELLED.value,
                None, time.time()))
        return {"msg": "canceled"}
