"""Completion hints for a statement being typed in a SQL gateway session (Flink's
complete-statement, rest/sql.py): keywords (jm/policy/sql/sqlcomplete.py), the session's
tables and views and Spark's functions, gathered in its Spark session on the peer that
holds it (jm/cluster/sql/sessionhost.py).
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Optional

from jm.cluster.sql.sessionhost import SessionHost
from jm.cluster.sql.sqlops import LocalSession
from jm.policy.sql import sqlcomplete
from jm.runtime import sqlproto as P
from jm.api import ApiError

log = logging.getLogger("jm.sql")

NAMES_MAX = 10_000  # table or function names gathered for a completion
NAMES_WAIT = 10.0   # s: a completion's wait for the session's names (else keywords only)


class SqlCompletion:
    def __init__(self, host: SessionHost) -> None:
        self.host = host
        self.functions: Optional[tuple] = None  # Spark's function names: once per peer

    async def complete(self, handle: str, body: dict, forwarded: bool) -> list:
        """Flink's complete-statement: the hints for the word typed at `position`
        (jm/policy/sql/sqlcomplete.py), with the session's tables and views and Spark's
        functions gathered from its Spark session (keywords only if that fails)."""
        try:
            statement, position = sqlcomplete.request(body)
        except sqlcomplete.BadRequest as exc:
            raise ApiError(400, str(exc))
        s = self.host.held(handle, forwarded)
        ctx = sqlcomplete.context(statement, position)
        if ctx is None or not (ctx.prefix or ctx.wants_tables):
            return [] if ctx is None else sqlcomplete.candidates(ctx)
        tables = [r[1] for r in await self._names(s, "SHOW TABLES")
                  if len(r) > 1 and isinstance(r[1], str)]
        if self.functions is None and ctx.prefix:  # Spark's own: the same for every session
            names = tuple(r[0] for r in await self._names(s, "SHOW SYSTEM FUNCTIONS")
                          if r and isinstance(r[0], str))
            self.functions = names or None
        return sqlcomplete.candidates(ctx, tables, self.functions or ())

    async def _names(self, s: LocalSession, statement: str) -> list:
        """The rows of a SHOW statement run in the session's Spark session; none if it
        cannot run (no Spark server, the worker restarting)."""
        op_id = f"complete-{uuid.uuid4()}"
        try:
            await asyncio.wait_for(self.host.open(s.handle), NAMES_WAIT)
            worker = s.worker
            page = await worker.call(P.Execute(s.handle, op_id, statement, {},
                                               NAMES_MAX), timeout=NAMES_WAIT)
        except Exception as exc:  # (a hint is never worth an error)
            log.info("completion names of session %s: %s", s.handle, exc)
            return []
        asyncio.ensure_future(self.host.quiet(worker, P.CloseOperation(op_id)))
        return list(page.get("rows") or ())
