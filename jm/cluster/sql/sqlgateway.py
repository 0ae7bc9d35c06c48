"""The SQL gateway of a peer (Flink SQL Gateway's REST API, rest/sql.py, and Apache
Livy's interactive sessions, rest/livysessions.py): one role object each, on the sessions
this peer holds.

    host        the sessions held here, their Spark sessions (jm/cluster/sql/sessionhost.py)
    sessions    open, describe, keep alive, close; waits while one moves (sqlsessions.py)
    statements  Flink's operations on a session held here (sqlstatements.py)
    completion  hints for a statement being typed (sqlcompletion.py)
    livy        Livy's sessions and statements (livysessions.py, livyrunner.py)

What rest/sql.py asks (rest.gateway.SqlGatewayApi) is answered by the role it concerns.
"""
from __future__ import annotations

from jm.cluster.sql.livysessions import LivySessions
from jm.cluster.sql.sqlservices import SqlServices
from jm.cluster.sql.sessionhost import SessionHost
from jm.cluster.sql.sqlcompletion import SqlCompletion
from jm.cluster.sql.sqlsessions import SqlSessions
from jm.cluster.sql.sqlstatements import SqlStatements
from jm.api import Credential, ResultPage, SessionInfo


class SqlGateway:
    def __init__(self, svc: SqlServices) -> None:
        self.max_statement_size: int = svc.conf["sql-gateway.max-statement-size"]
        self.host = SessionHost(svc)
        self.sessions = SqlSessions(self.host)
        self.statements = SqlStatements(svc, self.host)
        self.completion = SqlCompletion(self.host)
        self.livy = LivySessions(svc, self.host, self.sessions, self.statements)

    def start(self) -> None:
        self.host.start()
        self.statements.start()
        self.livy.start()

    async def close(self) -> None:
        await self.livy.close()
        await self.statements.close()
        await self.host.close()

    # ---- sessions (rest.gateway.SqlGatewayApi) ------------------------------------------
    async def open_session(self, body: dict, who: Credential) -> str:
        return await self.sessions.open_session(body, who)

    def session_info(self, handle: str) -> SessionInfo:
        return self.sessions.session_info(handle)

    async def heartbeat(self, handle: str, forwarded: bool) -> None:
        await self.sessions.heartbeat(handle, forwarded)

    async def close_session(self, handle: str) -> str:
        return await self.sessions.close_session(handle)

    def move_wait(self) -> float:
        return self.sessions.move_wait()

    async def wait_moved(self, handle: str, holder_url: str, deadline: float) -> bool:
        return await self.sessions.wait_moved(handle, holder_url, deadline)

    def proxy_read_timeout(self) -> float:
        return self.sessions.proxy_read_timeout()

    async def catch_up(self) -> None:
        await self.sessions.catch_up()

    # ---- statements ---------------------------------------------------------------------
    async def execute(self, handle: str, body: dict, forwarded: bool,
                      request_id: str = "") -> str:
        return await self.statements.execute(handle, body, forwarded, request_id)

    def status(self, handle: str, op_id: str, forwarded: bool) -> str:
        return self.statements.status(handle, op_id, forwarded)

    async def cancel(self, handle: str, op_id: str, forwarded: bool) -> str:
        return await self.statements.cancel(handle, op_id, forwarded)

    async def close_operation(self, handle: str, op_id: str, forwarded: bool) -> str:
        return await self.statements.close_operation(handle, op_id, forwarded)

    async def fetch(self, handle: str, op_id: str, token: int, row_format: str,
                    forwarded: bool) -> ResultPage:
        return await self.statements.fetch(handle, op_id, token, row_format, forwarded)

    async def complete(self, handle: str, body: dict, forwarded: bool) -> list:
        return await self.completion.complete(handle, body, forwarded)
