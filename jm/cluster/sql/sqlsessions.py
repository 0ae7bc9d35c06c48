"""The SQL gateway's sessions as a client sees them (Flink SQL Gateway's REST API,
rest/sql.py): opened (placed on the ready peer holding the fewest), described, kept
alive and closed, through any peer. The sessions themselves are held by one peer each
(jm/cluster/sql/sessionhost.py).

What is replicated (raft/sessions.py): which peer holds each session and the
statements that define its state (SET, USE, temporary views...), so that another peer
can rebuild it. A request for a session held by another peer raises `Forward` with that
peer's URL (rest/sql.py proxies it); a session unknown to the replicated state is a 404.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any, Mapping

from jm.cluster.sql.sessionhost import SessionHost, check_deps
from jm.policy.api.tenancy import tenant_for
from jm.policy.sql.sqlop import OpStatus
from raft import sessions as S
from raft.commands import CloseSqlSessions, OpenSqlSession
from raft.node import RaftUnavailable
from jm.api import ANYONE, ApiError, Credential, SessionInfo

CLOSED = OpStatus.CLOSED
MAX_PROPERTIES_SIZE = 64 * 1024  # bytes of a session's name and properties


def check_properties_size(props: Mapping[str, str], *names: str) -> None:
    """413 when a session's properties and names (its name, a Livy proxyUser) are more
    than MAX_PROPERTIES_SIZE bytes: they are kept in the replicated state and sent to
    each holder."""
    size = sum(len(k.encode("utf-8", "replace")) + len(v.encode("utf-8", "replace"))
               for k, v in props.items()) + sum(len(n.encode("utf-8", "replace"))
                                                for n in names)
    if size > MAX_PROPERTIES_SIZE:
        raise ApiError(413, f"the session's name and properties are {size} bytes, more "
                            f"than {MAX_PROPERTIES_SIZE}")


class SqlSessions:
    """Open, describe, keep alive and close sessions; where a request for one waits while
    it moves."""

    def __init__(self, host: SessionHost) -> None:
        self.host = host
        self.node, self.conf, self.raft = host.node, host.conf, host.raft

    def move_wait(self) -> float:
        """A dead holder's sessions move `heartbeat.timeout` after its last heartbeat (a
        new leader may take a Raft election more): wait that long and a little more."""
        return min(self.conf["heartbeat.timeout"] + 2.0, 10.0)

    async def catch_up(self) -> None:
        """Until this replica has applied everything committed before now (one Raft
        barrier): a session opened through another peer an instant ago is known here."""
        try:
            await self.raft.barrier(self.conf["rest.write-timeout"])
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
                _, url = self.host.record(handle)
            except ApiError:
                return True  # closed meanwhile: the request's answer is a 404 now
            if url != holder_url:
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.05)

    # ---- sessions -----------------------------------------------------------------------
    async def open_session(self, body: dict, who: Credential = ANYONE) -> str:
        props = body.get("properties") or {}
        name = body.get("sessionName") or ""
        if not isinstance(props, dict) or not all(isinstance(k, str) for k in props):
            raise ApiError(400, "properties must be an object of string keys")
        if not isinstance(name, str):
            raise ApiError(400, "sessionName must be a string")
        props = {k: str(v) for k, v in props.items()}
        check_properties_size(props, name)
        check_deps(props)
        tenant = tenant_for(who, None)
        handle, node, limit = str(uuid.uuid4()), *self.place()
        await self.open_checked(OpenSqlSession(handle, name, props, node, time.time(), limit,
                                               tenant, who.name))
        return handle

    def place(self) -> tuple[str, int]:
        """(the peer a new session goes to, sql-gateway.max-sessions): the ready peer
        holding the fewest sessions (this one on a tie); 503 if every one is full."""
        limit = self.conf["sql-gateway.max-sessions"]
        with self.raft.read() as st:
            counts = S.session_counts(st)
            ready = {p.id for p in st.alive_peers() if not p.draining and p.ready}
        room = [n for n in counts if n in ready and (limit <= 0 or counts[n] < limit)]
        if not room:
            raise ApiError(503, "every peer holds sql-gateway.max-sessions sessions (or none "
                                "is ready); retry later", headers={"Retry-After": "2"})
        return min(room, key=lambda n: (counts[n], n != self.node, n)), limit

    async def open_checked(self, command: Any) -> Any:
        """Commit a session's opening: its result's value, or the ApiError."""
        res = await self.host.commit(command)
        if not res.ok and res.code == "quota":  # (the tenant's: until one of its closes)
            raise ApiError(429, res.error, headers={"Retry-After": "10"})
        if not res.ok and res.code == "protocol":  # (an older peer's build: until upgraded)
            raise ApiError(409, res.error)
        if not res.ok:
            raise ApiError(503 if res.code in ("full", "unavailable") else 400, res.error,
                           headers={"Retry-After": "1"})
        return res.value

    def session_info(self, handle: str) -> SessionInfo:
        rec, url = self.host.record(handle)
        return SessionInfo(dict(rec.properties), rec.name, rec.node, url, len(rec.statements),
                           rec.moves)

    async def heartbeat(self, handle: str, forwarded: bool) -> None:
        self.host.held(handle, forwarded)

    async def close_session(self, handle: str) -> str:
        self.host.record(handle)
        res = await self.host.commit(CloseSqlSessions((handle,), time.time(), "closed"))
        if not res.ok:
            raise ApiError(400, res.error)
        return CLOSED.value
