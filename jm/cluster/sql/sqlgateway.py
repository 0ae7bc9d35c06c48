"""The SQL gateway of a peer (Flink SQL Gateway's REST API, rest/sql.py, and Apache
Livy's interactive sessions, rest/livysessions.py): one role object each, on the sessions
this peer holds.

    host        the sessions held here, their Spark sessions (jm/cluster/sql/sessionhost.py)
    sessions    open, describe, keep alive, close; waits while one moves (sqlsessions.py)
    statements  Flink's operations on a session held here (sqlstatements.py)
    completion  hints for a statement being typed (sqlcompletion.py)
    livy        Livy's sessions and statements (livysessions.py, livyrunner.py)

rest/sql.py asks the role itself (rest.gateway.SqlGatewayApi: sessions, statements,
completion), with no delegation in between.
"""
from __future__ import annotations

from jm.cluster.sql.livysessions import LivySessions
from jm.cluster.sql.sqlservices import SqlServices
from jm.cluster.sql.sessionhost import SessionHost
from jm.cluster.sql.sqlcompletion import SqlCompletion
from jm.cluster.sql.sqlsessions import SqlSessions
from jm.cluster.sql.sqlstatements import SqlStatements


class SqlGateway:
    host: SessionHost
    sessions: SqlSessions
    statements: SqlStatements
    completion: SqlCompletion
    livy: LivySessions

    def __init__(self, svc: SqlServices) -> None:
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
