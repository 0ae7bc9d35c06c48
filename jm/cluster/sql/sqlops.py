"""A SQL operation and a SQL session as the peer holding the session keeps them
(jm/cluster/sql/sqlgateway.py). An operation's status changes only through `update_state`,
checked against jm/policy/sql/sqlop.py's table."""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Optional

from jm.policy.sql.sqlop import OpState, OpStatus, Refused, update_state

log = logging.getLogger("jm.sql")


class Operation:
    """A statement run in the session's holder: its status, its pages and its task."""
    def __init__(self, op_id: str, statement: str, kind: str) -> None:
        self.id = op_id
        self.statement = statement
        self.kind = kind
        self.state = OpState()                # changed by update_state only
        self.columns: list = []
        self.schema: Optional[dict] = None    # Spark's schema of its rows (Livy's output)
        self.has_content = False
        self.page: Optional[dict] = None      # rows of token `served` (kept for a retry)
        self.served = -1                      # the last token answered
        self.eos = False                      # no page after the current one
        self.done = asyncio.Event()
        self.task: Optional[asyncio.Task] = None
        self.lock = asyncio.Lock()            # one fetch at a time
        self.rerun = False                    # run again here after its peer died
        self.record: Any = None               # its record in the session (SqlOperation)
        self.logged: Optional[asyncio.Future] = None  # that record, written
        self.worker: Any = None               # the SQL worker it runs in (once it runs)

    @property
    def status(self) -> OpStatus:
        return self.state.status

    @property
    def error(self) -> Optional[str]:
        return self.state.error

    def update_state(self, to: OpStatus, error: Optional[str] = None) -> bool:
        """Change the status if jm/policy/sql/sqlop.py's table allows it (True); a refused
        change (a statement that ends after it was cancelled or closed) leaves it."""
        new = update_state(self.state, to, error)
        if isinstance(new, Refused):
            log.debug("SQL operation %s: %s", self.id, new)
            return False
        self.state = new
        return True


class LocalSession:
    """A session this peer holds: where it is open, and its operations."""
    def __init__(self, handle: str, epoch: int, now: float) -> None:
        self.handle = handle
        self.epoch = epoch
        self.last_access = now
        self.generation = 0                   # the worker generation it is open in
        self.server = 0                       # the Spark server generation it is open in
        self.engine: Any = None               # the engine it is open on (acquired)
        self.engine_key: Any = None
        self.user: Optional[str] = None       # its tenant's OS user (None: the peer's)
        self.bounds: tuple = (0, 0)           # its tenant's memory and CPU weight (0: none)
        self.worker: Any = None               # the SQL worker of that engine
        self.opening: Optional[asyncio.Future] = None
        self.ops: dict[str, Operation] = {}
