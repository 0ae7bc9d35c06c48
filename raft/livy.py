"""Apache Livy's interactive sessions in the replicated state (pure, like raft/state.py).

A Livy session is a SQL gateway session (raft/sessions.py: placed, moved when its peer
dies, its state-defining statements replayed by its next holder) with a `LivyRecord`:
an integer id and its statements. Statements are numbered here, so that every peer
answers the same list, and a statement sent again with its request id (after its
holder died before answering) is the same statement, never a second run."""
from __future__ import annotations

from enum import Enum
from typing import Mapping

from raft import commands as c
from raft import sessions as sql
from raft.records import LivyRecord, LivyStatementRecord, Result

KINDS = ("pyspark", "sql", "shared")


class StatementState(str, Enum):
    """Livy's statement states, as its REST API answers them. Only an end is recorded (a
    statement's `state`, empty before); waiting and running follow from its place in its
    session (one runs at a time, in order), cancelling from its holder."""
    WAITING = "waiting"
    RUNNING = "running"
    CANCELLING = "cancelling"
    AVAILABLE = "available"  # it ran: its output says ok or error, as Livy's
    ERROR = "error"          # it could not run
    CANCELLED = "cancelled"


S = StatementState
# every change a statement may go through (as jm/policy/sql/sqlop.py's for SQL operations;
# here, since the replicated record checks the end): one cancelled while it waits never
# runs; an end is final (a retried end, or a cancel after it ran, changes nothing)
TRANSITIONS: Mapping[StatementState, frozenset] = {
    S.WAITING: frozenset({S.RUNNING, S.CANCELLED}),
    S.RUNNING: frozenset({S.CANCELLING, S.AVAILABLE, S.ERROR, S.CANCELLED}),
    S.CANCELLING: frozenset({S.AVAILABLE, S.ERROR, S.CANCELLED}),
    S.AVAILABLE: frozenset(), S.ERROR: frozenset(), S.CANCELLED: frozenset(),
}
ENDS = frozenset({S.AVAILABLE, S.ERROR, S.CANCELLED})


def may_become(current: StatementState, to: StatementState) -> bool:
    return to in TRANSITIONS[current]
MAX_STATEMENTS_KEPT = 200       # per session: the oldest ended ones go first
MAX_CODE_CHARS = 1024 * 1024
MAX_NOTES = 20


def session_of(state, number: int):
    """(the SQL session record, its LivyRecord), or (None, None)."""
    handle = state.livy_ids.get(number)
    s = state.sessions.get(handle) if handle is not None else None
    if s is None or s.livy is None:
        return None, None
    return s, s.livy


def open_session(state, cmd: c.OpenLivySession) -> Result:
    if cmd.kind not in KINDS:
        return Result.fail("invalid", f"a Livy session's kind is one of {', '.join(KINDS)}")
    known = state.sessions.get(cmd.handle)
    if known is not None and known.livy is not None:  # the same request again
        return Result(True, {"id": known.livy.id, "handle": cmd.handle, "node": known.node})
    res = sql.open_session(state, c.OpenSqlSession(cmd.handle, cmd.name, cmd.properties,
                                                   cmd.node, cmd.time, cmd.limit,
                                                   cmd.tenant, cmd.submitter))
    if not res.ok:
        return res
    number = state.next_livy
    state.next_livy += 1
    notes = [str(n)[:1000] for n in tuple(cmd.notes)[:MAX_NOTES]]
    state.sessions[cmd.handle].livy = LivyRecord(number, cmd.kind, notes=notes,
                                                 proxy_user=cmd.proxy_user or None)
    state.livy_ids[number] = cmd.handle
    return Result(True, {"id": number, "handle": cmd.handle, "node": cmd.node})


def add_statement(state, cmd: c.AddLivyStatement) -> Result:
    s, livy = session_of(state, cmd.session)
    if livy is None:
        return Result.fail("not-found", f"unknown Livy session {cmd.session}")
    if cmd.request_id:
        for st in livy.statements:
            if st.request_id == cmd.request_id:
                return Result(True, st.id)
    _, refused = sql._held(state, s.handle, cmd.node, cmd.epoch)
    if refused is not None:
        return refused
    if not isinstance(cmd.code, str) or len(cmd.code) > MAX_CODE_CHARS:
        return Result.fail("invalid", f"a statement's code is a string of at most "
                                      f"{MAX_CODE_CHARS} characters")
    number = livy.next_statement
    livy.next_statement += 1
    livy.statements.append(LivyStatementRecord(number, cmd.code, cmd.kind, cmd.time,
                                               cmd.epoch, cmd.request_id))
    if len(livy.statements) > MAX_STATEMENTS_KEPT:
        ended = [st for st in livy.statements if st.state]
        for st in ended[:len(livy.statements) - MAX_STATEMENTS_KEPT]:
            livy.statements.remove(st)
    return Result(True, number)


def find_statement(livy: LivyRecord, number: int):
    for st in livy.statements:
        if st.id == number:
            return st
    return None


def end_statement(state, cmd: c.EndLivyStatement) -> Result:
    s, livy = session_of(state, cmd.session)
    if livy is None:
        return Result.fail("not-found", f"unknown Livy session {cmd.session}")
    _, refused = sql._held(state, s.handle, cmd.node, cmd.epoch)
    if refused is not None:
        return refused
    try:
        to = StatementState(cmd.state)
    except ValueError:
        to = None
    if to not in ENDS:
        return Result.fail("invalid", "a Livy statement ends " +
                           ", ".join(sorted(e.value for e in ENDS)))
    if cmd.output is not None and not isinstance(cmd.output, dict):
        return Result.fail("invalid", "a Livy statement's output is an object")
    st = find_statement(livy, cmd.statement)
    if st is None:
        return Result.fail("not-found", f"unknown statement {cmd.statement}")
    now = StatementState(st.state) if st.state else S.RUNNING  # (or waiting: same ends)
    if not may_become(now, to):
        return Result(True, st.state)  # ended already (a retried end, or cancelled)
    st.state, st.output, st.completed = to.value, cmd.output, cmd.time
    return Result(True, st.state)


HANDLERS = {
    c.OpenLivySession: open_session,
    c.AddLivyStatement: add_statement,
    c.EndLivyStatement: end_statement,
}
