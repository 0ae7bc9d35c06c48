"""SQL gateway sessions in the replicated state (pure, like raft/state.py): which peer
holds each session, and the statements that rebuild it elsewhere. A session whose peer
is declared dead moves at once to the live peer holding the fewest sessions; one that
finds no live peer waits (node None) for the next peer to register."""
from __future__ import annotations

from typing import Optional

from raft import commands as c, tenants
from raft.records import ALIVE, Result, SqlSessionRecord

MAX_SESSION_STATEMENTS = 500          # state-defining statements kept per session
MAX_STATEMENT_CHARS = 64 * 1024
MAX_OPS_KEPT = 32                     # operations remembered per session (for a failover)
MAX_ERROR_CHARS = 4096                # of an ended operation's error
MAX_CONFIG_CHARS = 16 * 1024          # of an operation's executionConfig (else not kept)
ENDS = ("FINISHED", "ERROR")


def sessions_of(state, node: str) -> list[str]:
    return [h for h, s in state.sessions.items() if s.node == node]


def session_counts(state) -> dict[str, int]:
    counts = {p.id: 0 for p in state.peers.values() if p.state == ALIVE}
    for s in state.sessions.values():
        if s.node in counts:
            counts[s.node] += 1
    return counts


def least_loaded(state, exclude: Optional[str] = None) -> Optional[str]:
    """The live, non-draining peer holding the fewest sessions (ties: by id), or None."""
    counts = session_counts(state)
    live = [p.id for p in state.peers.values()
            if p.state == ALIVE and not p.draining and p.id != exclude]
    if not live:
        return None
    return min(live, key=lambda n: (counts.get(n, 0), n))


def move_sessions_of(state, node: str, time: float) -> list[str]:
    """The sessions held by `node` (declared dead or restarted) go to other peers."""
    moved = []
    for handle in sessions_of(state, node):
        s = state.sessions[handle]
        s.node = least_loaded(state, exclude=node)
        s.epoch += 1
        s.moves += 1
        moved.append(handle)
    return moved


def place_orphans(state) -> None:
    """Sessions without a peer (none was alive when theirs died) go to live peers."""
    for s in state.sessions.values():
        if s.node is None:
            s.node = least_loaded(state)
            if s.node is None:
                return


def open_session(state, cmd: c.OpenSqlSession) -> Result:
    if cmd.handle in state.sessions:
        s = state.sessions[cmd.handle]
        return Result(True, {"handle": s.handle, "node": s.node, "duplicate": True})
    peer = state.peers.get(cmd.node)
    if peer is None or peer.state != ALIVE:
        return Result.fail("unavailable", f"peer {cmd.node} is not alive")
    if not isinstance(cmd.properties, dict):
        return Result.fail("invalid", "session properties must be a mapping")
    if cmd.limit > 0 and session_counts(state).get(cmd.node, 0) >= cmd.limit:
        return Result.fail("full", f"peer {cmd.node} holds {cmd.limit} sessions already")
    over = tenants.session_refusal(state, cmd.tenant)
    if over is not None:
        return over
    state.sessions[cmd.handle] = SqlSessionRecord(cmd.handle, cmd.name, dict(cmd.properties),
                                                  cmd.node, cmd.time, tenant=cmd.tenant,
                                                  submitter=cmd.submitter)
    return Result(True, {"handle": cmd.handle, "node": cmd.node})


def close_sessions(state, cmd: c.CloseSqlSessions) -> Result:
    closed = [h for h in cmd.handles if state.sessions.pop(h, None) is not None]
    if state.livy_ids:
        for number, handle in list(state.livy_ids.items()):
            if handle in closed:
                del state.livy_ids[number]
    return Result(True, closed)


def _held(state, handle: str, node: str, epoch: int):
    """(the session, None) if `node` holds it at `epoch`, else (None, why not)."""
    s = state.sessions.get(handle)
    if s is None:
        return None, Result.fail("not-found", f"unknown session {handle}")
    if s.node != node or s.epoch != epoch:
        return None, Result.fail("stale", f"session {handle} is held by {s.node} at epoch "
                                          f"{s.epoch}, not {node} at {epoch}")
    return s, None


def add_statement(state, cmd: c.AddSqlStatement) -> Result:
    s, refused = _held(state, cmd.handle, cmd.node, cmd.epoch)
    if refused is not None:
        return refused
    if len(cmd.statement) > MAX_STATEMENT_CHARS:
        return Result.fail("invalid", f"a session-defining statement is limited to "
                                      f"{MAX_STATEMENT_CHARS} characters")
    if len(s.statements) >= MAX_SESSION_STATEMENTS:
        return Result.fail("full", f"session {cmd.handle} has {MAX_SESSION_STATEMENTS} "
                                   "state-defining statements; open a new session")
    s.statements.append(cmd.statement)
    if cmd.op in s.ops:
        s.ops[cmd.op]["end"] = "FINISHED"
    return Result(True, len(s.statements))


def _start_one(state, o: c.SqlOperation) -> Result:
    s, refused = _held(state, o.handle, o.node, o.epoch)
    if refused is not None:
        return refused
    if o.end:  # a started one ended
        if o.end not in ENDS:
            return Result.fail("invalid", f"an operation ends {' or '.join(ENDS)}")
        if o.op not in s.ops:
            return Result.fail("not-found", f"operation {o.op} is not recorded")
        error = o.error[:MAX_ERROR_CHARS] if isinstance(o.error, str) else ""
        s.ops[o.op].update(end=o.end, error=error or None)
        return Result(True)
    text = o.statement if len(o.statement) <= MAX_STATEMENT_CHARS else None
    s.ops[o.op] = {"statement": text, "kind": o.kind, "epoch": o.epoch, "node": o.node}
    if o.config and isinstance(o.config, dict) and len(repr(o.config)) <= MAX_CONFIG_CHARS:
        s.ops[o.op]["config"] = {str(k): str(v) for k, v in o.config.items()}
    if o.answers_ok:
        s.ops[o.op]["answers_ok"] = True
    if len(s.ops) > MAX_OPS_KEPT:
        for op in list(s.ops)[:len(s.ops) - MAX_OPS_KEPT]:
            del s.ops[op]
    return Result(True)


def start_operations(state, cmd: c.StartSqlOperations) -> Result:
    out = []
    for o in cmd.ops:
        if not isinstance(o, c.SqlOperation):
            out.append(Result.fail("invalid", "not a SqlOperation"))
            continue
        out.append(_start_one(state, o))
    return Result(True, out)


HANDLERS = {
    c.StartSqlOperations: start_operations,
    c.OpenSqlSession: open_session,
    c.CloseSqlSessions: close_sessions,
    c.AddSqlStatement: add_statement,
}
