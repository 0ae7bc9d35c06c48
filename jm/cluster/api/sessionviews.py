"""Every open session of the cluster, of every kind (GET /cluster/sessions, `jm
sessions`), from this peer's replica: SQL gateway, Livy and Spark Connect sessions."""
from __future__ import annotations

from typing import Optional

from jm.api import ANYONE, ApiError, Credential
from jm.wire import views


class SessionViews:
    def __init__(self, raft) -> None:
        self.raft = raft

    def page(self, kind: Optional[str], who: Credential = ANYONE) -> dict:
        """`who`'s tenant's sessions (every tenant's for a caller of none), of `kind`."""
        if kind is not None and kind not in views.SESSION_KINDS:
            raise ApiError(400, f"kind must be one of {', '.join(views.SESSION_KINDS)}, "
                                f"not {kind!r}")
        with self.raft.read() as st:
            return views.sessions(st, views.ALL_TENANTS if who.sees_all else who.tenant,
                                  kind)
