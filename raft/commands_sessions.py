"""The commands of the SQL gateway's and Livy's sessions (re-exported by raft/commands.py,
which lists every command): sessions held by a peer and fenced by its epoch, the
statements that define a session's state and the operations a next holder answers
(raft/sessions.py, raft/livy.py)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class OpenSqlSession:
    """Open a SQL gateway session held by `node` (chosen by the receiving peer); refused
    if that peer is not alive or already holds `limit` sessions (0: no limit)."""
    handle: str
    name: str
    properties: dict
    node: str
    time: float
    limit: int = 0
    tenant: Optional[str] = None
    submitter: str = ""


@dataclass(frozen=True)
class CloseSqlSessions:
    handles: tuple
    time: float
    reason: str = "closed"


@dataclass(frozen=True)
class AddSqlStatement:
    """A state-defining statement that succeeded in a session (SET, USE, a temporary
    view...): kept in order for the session's next holder. Fenced by node and epoch.
    `op`: the operation that ran it (marked ended in the session's record)."""
    handle: str
    node: str
    epoch: int
    statement: str
    time: float
    op: str = ""


@dataclass(frozen=True)
class SqlOperation:
    """A statement started in a session, kept so that the session's next holder can run
    a read-only one again (or say a writing one may or may not have run). With `end`
    (FINISHED or ERROR, and its `error`): the end of a started one, so that the next
    holder answers it from the record instead."""
    handle: str
    op: str
    node: str
    epoch: int
    statement: str
    kind: str
    time: float
    end: str = ""
    error: str = ""
    config: dict = dataclasses.field(default_factory=dict)  # its executionConfig
    answers_ok: bool = False  # answered as Flink's SET/RESET: one row, OK


@dataclass(frozen=True)
class OpenLivySession:
    """Open a SQL gateway session (as OpenSqlSession) that is also a Livy interactive
    session; it gets the next Livy session id."""
    handle: str
    kind: str
    name: str
    properties: dict
    node: str
    time: float
    limit: int = 0
    notes: tuple = ()
    tenant: Optional[str] = None
    submitter: str = ""
    proxy_user: Optional[str] = None  # its Python process's OS user (proxyUser)


@dataclass(frozen=True)
class AddLivyStatement:
    """A statement for a Livy session, numbered by the state; fenced by its holder's node
    and epoch. A `request_id` already in the session gives that statement's number."""
    session: int
    node: str
    epoch: int
    code: str
    kind: str
    time: float
    request_id: str = ""


@dataclass(frozen=True)
class EndLivyStatement:
    """A Livy statement's end (state "available", "error" or "cancelled", and its
    output), fenced by its session's holder and epoch."""
    session: int
    statement: int
    node: str
    epoch: int
    state: str
    output: Optional[dict]
    time: float


@dataclass(frozen=True)
class StartSqlOperations:
    """Group commit of SqlOperations; one Result per operation."""
    ops: tuple


@dataclass(frozen=True)
class OpenConnectSession:
    """A Spark Connect session of `node`'s endpoint (raft/connect.py): refused over its
    tenant's session quota or the peer's `limit` (0: none)."""
    session_id: str
    node: str
    time: float
    tenant: Optional[str] = None
    submitter: str = ""
    user_id: str = ""
    limit: int = 0


@dataclass(frozen=True)
class CloseConnectSessions:
    session_ids: tuple
    node: str
    time: float
    reason: str = "closed"
