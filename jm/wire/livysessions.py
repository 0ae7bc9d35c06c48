"""Apache Livy's interactive sessions on our SQL gateway sessions (pure): the request
fields, and sessions and statements as Livy's JSON (the shapes Jupyter's sparkmagic and
the `livy` client read).

A session's `kind` is the default kind of its statements; a statement may give its own
(`pyspark` or `sql`; a `shared` session, Livy's session without a kind, needs it). Python
code runs in a Python process of the session on its peer, with `spark` a Spark Connect
session on the peer's Spark server; SQL runs in the same Spark session through the SQL
gateway. `jars`, `pyFiles`, `files` and `archives` become the session's properties as
Livy maps them (`spark.jars`, ...: jm/policy/sql/sessiondeps.py), and `conf`'s
`spark.jm.requirements` its Python environment. Resource fields (`driverMemory`,
`numExecutors`, ...) have no effect here: the sessions share their engine, and the
session's log says so."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from jm.policy.sql.sessiondeps import LIVY_FIELDS, livy_fields
from jm.policy.jobs.spec import USER_RE
from raft.livy import StatementState, may_become
from raft.records import LivyRecord, LivyStatementRecord

SESSION_KINDS = ("pyspark", "sql", "shared")
STATEMENT_KINDS = ("pyspark", "sql")
REFUSED_KINDS = {"spark": "Scala", "sparkr": "R", "pyspark3": None}
RESOURCE_FIELDS = ("driverMemory", "driverCores", "executorMemory", "executorCores",
                   "numExecutors", "queue")
KNOWN = {"kind", "name", "conf", "proxyUser", "heartbeatTimeoutInSecond", "ttl",
         *RESOURCE_FIELDS, *LIVY_FIELDS}
MAX_OUTPUT = 512 * 1024          # bytes of a statement's output kept (in the replicated state)
SQL_ROWS = 1000                  # rows of a SQL statement's output (livy.rsc.sql.num-rows)
JSON_TYPE, TEXT_TYPE = "application/json", "text/plain"
TABLE_TYPE = "application/vnd.livy.table.v1+json"


@dataclass(frozen=True)
class SessionRequest:
    kind: str
    name: str
    conf: dict
    notes: tuple
    proxy_user: Optional[str] = None  # the OS user its Python process runs as


def _kind(value: Any, allowed: tuple, what: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        lang = REFUSED_KINDS.get(value) if isinstance(value, str) else None
        why = f" ({lang} code does not run here)" if lang else ""
        raise ValueError([f"{what} {value!r} is not one of {', '.join(allowed)}{why}"])
    return value


def is_livy_request(body: Any) -> bool:
    """POST /sessions is both Livy's and Flink SQL Gateway's (v2): Livy's if the body has
    one of Livy's fields and none of Flink's (an empty body opens a Flink session)."""
    return (isinstance(body, dict) and bool(KNOWN & set(body))
            and not {"properties", "sessionName"} & set(body))


def session_request(body: Any) -> SessionRequest:
    """POST /sessions -> what to open; ValueError with every problem found."""
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise ValueError(["the body must be a JSON object (a Livy session request)"])
    errors: list = []
    unknown = sorted(set(body) - KNOWN)
    if unknown:
        errors.append(f"unknown field(s): {', '.join(unknown)}")
    kind = body.get("kind", "shared")
    try:
        _kind(kind, SESSION_KINDS, "kind")
    except ValueError as exc:
        errors += exc.args[0]
    proxy_user = body.get("proxyUser") or None
    if proxy_user is not None and (not isinstance(proxy_user, str)
                                   or not USER_RE.fullmatch(proxy_user)):
        errors.append("proxyUser must be a user name (lower-case letters, digits, '_' or "
                      "'-', at most 32)")
    name = body.get("name")
    if name is not None and not isinstance(name, str):
        errors.append("name must be a string")
    conf = {} if body.get("conf") is None else body["conf"]
    if not isinstance(conf, dict):
        errors.append("conf must be an object of Spark properties")
        conf = {}
    files, problems = livy_fields(body)
    errors += problems
    if errors:
        raise ValueError(errors)
    given = [f for f in RESOURCE_FIELDS if body.get(f) not in (None, [], "")]
    notes = (f"{', '.join(given)}: not applied (interactive sessions share their engine; "
             "size it with the peers' spark.* settings)",) if given else ()
    props = {str(k): str(v) for k, v in conf.items()}
    props.update(files)
    return SessionRequest(kind, name or "", props, notes, proxy_user)


def statement_request(body: Any, session_kind: str) -> tuple[str, str]:
    """POST /sessions/{id}/statements -> (code, kind); ValueError with the problems."""
    if not isinstance(body, dict):
        raise ValueError(["the body must be a JSON object with code"])
    code = body.get("code")
    if not isinstance(code, str):
        raise ValueError(["code must be a string"])
    kind = body.get("kind")
    if kind is None:
        if session_kind == "shared":
            raise ValueError(["this session has no kind (shared): give the statement's "
                              "kind, pyspark or sql"])
        kind = session_kind
    return code, _kind(kind, STATEMENT_KINDS, "statement kind")


def statement_states(livy: LivyRecord) -> dict[int, StatementState]:
    """Livy's state of each statement: an ended one's own; of the others the first runs,
    the later ones wait (a session runs one statement at a time, in order)."""
    out, running = {}, False
    for st in livy.statements:
        if st.state:
            out[st.id] = StatementState(st.state)
        else:
            out[st.id] = StatementState.WAITING if running else StatementState.RUNNING
            running = True
    return out


def statement_json(st: LivyStatementRecord, state: StatementState,
                   cancelling: bool = False) -> dict:
    """`cancelling`: its holder is stopping it (a running statement may become so)."""
    ended = bool(st.state)
    if cancelling and may_become(state, StatementState.CANCELLING):
        state = StatementState.CANCELLING
    return {"id": st.id, "code": st.code, "state": state.value,
            "output": st.output, "progress": 1.0 if ended else 0.0,
            "started": int(st.started * 1000), "completed": int(st.completed * 1000)
            if ended else 0}


def session_state(livy: LivyRecord) -> str:
    return "busy" if any(not st.state for st in livy.statements) else "idle"


def session_json(livy: LivyRecord, name: str, log: Optional[list] = None,
                 peer: Optional[str] = None) -> dict:
    """Livy's session object; `appInfo.peer`: the peer holding it (ours)."""
    return {"id": livy.id, "name": name or None, "appId": None, "owner": None,
            "proxyUser": livy.proxy_user, "state": session_state(livy), "kind": livy.kind,
            "appInfo": {"driverLogUrl": None, "sparkUiUrl": None, "peer": peer},
            "log": list(log or []), "ttl": None}


def sql_output(number: int, schema: Optional[dict], rows: list) -> dict:
    """A SQL statement's output, as Livy's SQL interpreter gives it."""
    return {"status": "ok", "execution_count": number,
            "data": {JSON_TYPE: {"schema": schema or {"type": "struct", "fields": []},
                                 "data": rows[:SQL_ROWS]}}}


def error_output(number: int, ename: str, evalue: str, traceback: tuple = ()) -> dict:
    return {"status": "error", "execution_count": number, "ename": ename,
            "evalue": evalue, "traceback": list(traceback)}


def code_output(number: int, result: Any, notice: str = "") -> dict:
    """A Python statement's output from its CodeResult (jm/runtime/livyproto.py), with
    `notice` (the session lost its Python variables) first in its text."""
    text = (notice + "\n" if notice else "") + (result.text or "")
    if result.status != "ok":
        out = error_output(number, result.ename, result.evalue, tuple(result.traceback))
        if text:
            out["data"] = {TEXT_TYPE: text}
        return out
    data: dict = {TEXT_TYPE: text}
    if result.json is not None:
        data[JSON_TYPE] = result.json
    if result.table is not None:
        data[TABLE_TYPE] = result.table
    return {"status": "ok", "execution_count": number, "data": data}


def bounded(output: dict) -> dict:
    """The output cut to MAX_OUTPUT bytes of JSON: rows and text shortened, saying so."""
    if len(json.dumps(output, default=str)) <= MAX_OUTPUT:
        return output
    out = dict(output, data=dict(output.get("data") or {}))
    table = out["data"].get(JSON_TYPE)
    if isinstance(table, dict) and isinstance(table.get("data"), list):
        rows = list(table["data"])
        while rows and len(json.dumps(out, default=str)) > MAX_OUTPUT:
            rows = rows[:len(rows) // 2]
            out["data"][JSON_TYPE] = dict(table, data=rows)
    for key in list(out["data"]):
        if len(json.dumps(out, default=str)) <= MAX_OUTPUT:
            break
        if key != TEXT_TYPE:
            del out["data"][key]
    text = out["data"].get(TEXT_TYPE, "")
    note = f"\n[output cut: more than {MAX_OUTPUT // 1024} KB]"
    if len(json.dumps(out, default=str)) > MAX_OUTPUT:
        out["data"][TEXT_TYPE] = text[:MAX_OUTPUT // 8] + note
        if "traceback" in out:
            out["traceback"] = out["traceback"][-20:]
    elif not out["data"].get(TEXT_TYPE, "").endswith(note):
        out["data"][TEXT_TYPE] = text + note
    return out
