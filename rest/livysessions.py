"""Apache Livy's interactive sessions REST API (what Jupyter's sparkmagic and Livy
clients use), on every peer. jm/cluster/sql/livysessions.py does the work:

    POST   /sessions                       {"kind": "pyspark"|"sql", "name", "conf", ...}
    GET    /sessions[?from=&size=]         GET /sessions/{id}      GET /sessions/{id}/state
    GET    /sessions/{id}/log[?from=&size=]
    DELETE /sessions/{id}
    POST   /sessions/{id}/statements       {"code", "kind"?} -> 201 statement
    GET    /sessions/{id}/statements[?from=&size=]
    GET    /sessions/{id}/statements/{n}
    POST   /sessions/{id}/statements/{n}/cancel

Reads are answered by the peer the client reached (from its replica; after one Raft
barrier if it does not know the session yet). A new statement and a cancel are carried
out by the session's holder: proxied there, and sent to the next holder if it dies
(rest/sql.py), with the request id that makes a statement sent twice one statement."""
from __future__ import annotations

from typing import Any, Callable

from aiohttp import web

from rest import sql as proxy
from jm.api import ApiError, UnknownSession
from rest.gateway import LivySessionsApi
from rest.middleware import GATEWAY, caller
from rest.requests import int_or, int_param


def _livy(request: web.Request) -> LivySessionsApi:
    return request.app[GATEWAY].sql.livy


def _number(request: web.Request, name: str = "session_id") -> int:
    raw = request.match_info[name]
    try:
        return int(raw)
    except ValueError:
        what = "session" if name == "session_id" else "statement"
        raise ApiError(404, f"{what} {raw!r} not found ({what} ids are integers)")


async def _local(request: web.Request, read: Callable[[], Any]) -> web.Response:
    """A read from this peer's replica; once more after a Raft barrier if the session is
    unknown here (it may have been created through another peer an instant ago)."""
    try:
        return web.json_response(read())
    except UnknownSession:
        if proxy.is_forwarded(request):
            raise
        await request.app[GATEWAY].sql.sessions.catch_up()
        return web.json_response(read())


async def _handle(request: web.Request, number: int) -> str:
    livy = _livy(request)
    try:
        return livy.handle_of(number)
    except UnknownSession:
        await request.app[GATEWAY].sql.sessions.catch_up()
        return livy.handle_of(number)


async def post_session(request: web.Request) -> web.StreamResponse:
    """Livy's and Flink SQL Gateway's (v2, unprefixed) session opening share the path: a
    body with Livy's fields (`kind`, ...) and none of Flink's opens a Livy session."""
    body = await proxy.sql_body(request)  # (read no further than a SQL session's request)
    if not _livy(request).is_livy_request(body):
        return await proxy.open_session(request)
    return web.json_response(await _livy(request).open(body, caller(request)), status=201)


async def get_sessions(request: web.Request) -> web.Response:
    start, size = int_or(request, "from", 0), int_or(request, "size", 20)
    return web.json_response(_livy(request).sessions(start, size, caller(request)))


async def get_session(request: web.Request) -> web.Response:
    number = _number(request)
    return await _local(request, lambda: _livy(request).session(number))


async def get_state(request: web.Request) -> web.Response:
    number = _number(request)
    return await _local(request, lambda: {
        "id": number, "state": _livy(request).session(number)["state"]})


async def get_log(request: web.Request) -> web.Response:
    number = _number(request)
    start, size = int_param(request, "from", 0), int_param(request, "size", 0)
    return await _local(request, lambda: _livy(request).log(number, start, size))


async def delete_session(request: web.Request) -> web.Response:
    number = _number(request)
    await _handle(request, number)
    return web.json_response(await _livy(request).delete(number))


async def post_statement(request: web.Request) -> web.StreamResponse:
    number = _number(request)
    body = await proxy.sql_body(request, optional=False)
    request_id = proxy.statement_id(request)
    handle = await _handle(request, number)
    return await proxy.held_answer(request, lambda: _livy(request).submit(
        number, body, proxy.is_forwarded(request), request_id), handle, status=201)


async def get_statements(request: web.Request) -> web.Response:
    number = _number(request)
    start, size = int_or(request, "from", 0), int_or(request, "size", 1000)
    return await _local(request, lambda: _livy(request).statements(number, start, size))


async def get_statement(request: web.Request) -> web.Response:
    number, statement = _number(request), _number(request, "statement_id")
    return await _local(request, lambda: _livy(request).statement(number, statement))


async def cancel_statement(request: web.Request) -> web.StreamResponse:
    number, statement = _number(request), _number(request, "statement_id")
    handle = await _handle(request, number)
    return await proxy.held_answer(request, lambda: _livy(request).cancel(
        number, statement, proxy.is_forwarded(request)), handle)


def add_routes(app: web.Application) -> None:
    """Before the SQL gateway's routes: Livy's session ids are integers (`\\d+`), Flink's
    session handles UUIDs, under the same /sessions."""
    r, s = app.router, "/sessions/{session_id:\\d+}"
    r.add_post("/sessions", post_session)
    r.add_get("/sessions", get_sessions)
    r.add_get(s, get_session)
    r.add_get(s + "/state", get_state)
    r.add_get(s + "/log", get_log)
    r.add_delete(s, delete_session)
    r.add_post(s + "/statements", post_statement)
    r.add_get(s + "/statements", get_statements)
    r.add_get(s + "/statements/{statement_id}", get_statement)
    r.add_post(s + "/statements/{statement_id}/cancel", cancel_statement)
