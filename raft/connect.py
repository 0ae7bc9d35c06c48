"""Spark Connect sessions of the peers' Connect endpoints in the replicated state (pure,
like raft/state.py): which peer serves each, for whom. They count against their tenant's
session quota with the SQL and Livy sessions (raft/tenants.py), so that two peers
opening sessions of one tenant at once cannot both pass it. A session lives in its
peer's engine only: it does not move, and it ends when its peer dies, restarts or
leaves (`drop_sessions_of`)."""
from __future__ import annotations

from raft import commands as c, tenants
from raft.records import ALIVE, ConnectSessionRecord, Result

MAX_ID_CHARS = 256   # of a session id or user id kept


def sessions_of(state, node: str) -> list[str]:
    return [sid for sid, s in state.connect.items() if s.node == node]


def open_session(state, cmd: c.OpenConnectSession) -> Result:
    if not isinstance(cmd.session_id, str) or not cmd.session_id \
            or len(cmd.session_id) > MAX_ID_CHARS:
        return Result.fail("invalid", f"a session id is 1 to {MAX_ID_CHARS} characters")
    known = state.connect.get(cmd.session_id)
    if known is not None:
        if known.node == cmd.node and known.submitter == cmd.submitter:
            return Result(True, {"duplicate": True})
        return Result.fail("exists", f"session {cmd.session_id} is another one's")
    peer = state.peers.get(cmd.node)
    if peer is None or peer.state != ALIVE:
        return Result.fail("unavailable", f"peer {cmd.node} is not alive")
    if cmd.limit > 0 and len(sessions_of(state, cmd.node)) >= cmd.limit:
        return Result.fail("full", f"peer {cmd.node} serves {cmd.limit} Connect sessions "
                                   "already (spark.connect.endpoint.max-sessions)")
    over = tenants.session_refusal(state, cmd.tenant)
    if over is not None:
        return over
    user = cmd.user_id if isinstance(cmd.user_id, str) else ""
    state.connect[cmd.session_id] = ConnectSessionRecord(
        cmd.session_id, cmd.node, cmd.time, cmd.tenant, cmd.submitter, user[:MAX_ID_CHARS])
    return Result(True, {"session": cmd.session_id})


def close_sessions(state, cmd: c.CloseConnectSessions) -> Result:
    """Only the serving peer's own sessions: a close that arrives late, after the id
    was opened again elsewhere, closes nothing."""
    closed = []
    for sid in cmd.session_ids if isinstance(cmd.session_ids, (tuple, list)) else ():
        s = state.connect.get(sid)
        if s is not None and s.node == cmd.node:
            del state.connect[sid]
            closed.append(sid)
    return Result(True, closed)


def drop_sessions_of(state, node: str) -> list[str]:
    """`node` died, restarted or left: its endpoint's sessions are gone with it."""
    gone = sessions_of(state, node)
    for sid in gone:
        del state.connect[sid]
    return gone


HANDLERS = {c.OpenConnectSession: open_session, c.CloseConnectSessions: close_sessions}
