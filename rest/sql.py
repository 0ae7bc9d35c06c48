"""Flink SQL Gateway's REST API (v1 and v2; unprefixed paths are v2) on every peer.

Any peer accepts any session handle: a request for a session another peer holds is
proxied there (with the index this peer has applied, so the holder answers only once it
knows the session too). Errors are Flink's `{"errors": [...]}`."""
from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any, Awaitable, Callable, Optional

import aiohttp
from aiohttp import web

from jm.api import (FORWARDED, MIN_INDEX_HEADER, ApiError, Forward, ResultPage, SessionInfo,
                    UnknownSession)
from rest.middleware import CLIENT_SSL, GATEWAY, MAX_BODY, caller, forward_mark
from rest.gateway import SqlSessionsApi, SqlStatementsApi
from rest.requests import body_bytes, json_body

VERSIONS = ("v1", "v2")
REQUEST_ID = web.RequestKey("jm_request_id", str)  # the statement's request id
HTTP: web.AppKey[Any] = web.AppKey("sql_http")
SLOW_ANSWER = 1.0  # s: a proxied request this slow starts watching for its session's move
PRODUCT = {"productName": "Apache Spark (JobManager SQL Gateway)"}


BODY_OVERHEAD = 64 * 1024  # bytes of a SQL request besides its statement


def _sessions(request: web.Request) -> SqlSessionsApi:
    return request.app[GATEWAY].sql.sessions


def _statements(request: web.Request) -> SqlStatementsApi:
    return request.app[GATEWAY].sql.statements


def is_forwarded(request: web.Request) -> bool:
    return FORWARDED in request.headers


def _base(request: web.Request) -> str:
    first = request.path.split("/", 2)[1]
    return f"/{first}" if first in VERSIONS else ""


async def sql_body(request: web.Request, optional: bool = True) -> dict:
    """The request's JSON object, read only up to what a statement may be, plus room for
    its configuration (a generated multi-megabyte statement stalled the peer's loop)."""
    most = _statements(request).max_statement_size + BODY_OVERHEAD
    body = await json_body(request, optional=optional,
                           limit=("sql-gateway.max-statement-size", most)
                           if most <= request.app[MAX_BODY] else None)
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return body


async def held_answer(request: web.Request, fn: Callable[[], Awaitable[Any]],
                      handle: str = "", status: int = 200) -> web.StreamResponse:
    """Answer here, or proxy to the session's holder. A holder that cannot be reached
    (its peer died) makes the request wait, up to the gateway's `move_wait()`, for the
    session to move, and go to the new holder: the client sees a slower answer instead
    of a 503 and a retry a whole Retry-After later. A holder that does not answer (its
    peer is frozen) is given up as soon as the session moves away from it. Every request
    is safe to send again, whether or not it reached the old holder: a statement carries
    its request id (the client's X-Request-Id, else one made here, `statement_id`), by
    which the new holder finds it in the session's record; the others are idempotent."""
    sessions, loop = _sessions(request), asyncio.get_running_loop()
    deadline = loop.time() + sessions.move_wait()
    handle = handle or request.match_info["sh"]
    caught_up = is_forwarded(request)  # a forwarded request came with the sender's index
    while True:
        try:
            return web.json_response(await fn(), status=status)
        except UnknownSession:
            if caught_up:
                raise
            await sessions.catch_up()  # opened through another peer an instant ago?
            caught_up = True
        except Forward as fwd:
            try:
                return await _proxy_or_moved(request, handle, fwd.url)
            except _Unreachable as exc:
                # the session moved (go there), or half a second passed (the holder may be
                # back) unless the time to wait for a move is up
                moved = await sessions.wait_moved(handle, fwd.url, min(deadline, loop.time() + 0.5))
                if not moved and loop.time() >= deadline:
                    raise exc.error from None


async def _proxy_or_moved(request: web.Request, handle: str, url: str) -> web.StreamResponse:
    """The holder's answer; _Unreachable if it cannot be reached, or if the session moves
    to another peer while the holder keeps the request without an answer."""
    task = asyncio.ensure_future(_proxy(request, url))
    watch = None
    try:
        done, _ = await asyncio.wait({task}, timeout=SLOW_ANSWER)
        if not done:  # slow: watch the session's record meanwhile (not for every request)
            watch = asyncio.ensure_future(_sessions(request).wait_moved(handle, url, float("inf")))
            done, _ = await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:  # the session moved, or the client went away: the holder's answer is not wanted
        if watch is not None:
            watch.cancel()
        if not task.done():
            task.cancel()
    if task not in done:
        raise _Unreachable(ApiError(
            503, f"the peer holding this session ({url}) did not answer and the session "
                 "moved to another peer; retry", headers={"Retry-After": "1"}))
    return task.result()


class _Unreachable(Exception):
    def __init__(self, error: ApiError) -> None:
        super().__init__(str(error))
        self.error = error


async def _proxy(request: web.Request, url: str) -> web.StreamResponse:
    headers = {FORWARDED: forward_mark(request.app),
               MIN_INDEX_HEADER: str(request.app[GATEWAY].replica.applied_index())}
    for name in ("Authorization", "Content-Type", "Prefer"):
        if name in request.headers:
            headers[name] = request.headers[name]
    if request.get(REQUEST_ID):
        headers["X-Request-Id"] = request[REQUEST_ID]
    body = await body_bytes(request)
    try:
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=3,
                                        sock_read=_sessions(request).proxy_read_timeout())
        async with request.app[HTTP].request(request.method, url + request.path_qs,
                                             data=body or None, headers=headers,
                                             timeout=timeout,
                                             ssl=request.app.get(CLIENT_SSL, True)) as resp:
            data = await resp.read()
            out = web.Response(body=data, status=resp.status,
                               content_type=resp.content_type or "application/json")
            if "Retry-After" in resp.headers:
                out.headers["Retry-After"] = resp.headers["Retry-After"]
            return out
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise _Unreachable(ApiError(
            503, f"the peer holding this session ({url}) did not answer: {exc}; retry (a "
                 "session whose peer died moves to another one)", headers={"Retry-After": "1"}))


# ---- handlers ------------------------------------------------------------------------
async def api_versions(request: web.Request) -> web.Response:
    return web.json_response({"versions": [v.upper() for v in VERSIONS]})


async def info(request: web.Request) -> web.Response:
    try:
        from importlib.metadata import version
        spark = version("pyspark")
    except Exception:
        spark = "unknown"
    return web.json_response(dict(PRODUCT, version=spark))


# ---- Flink's JSON of the gateway's answers -------------------------------------------
def session_json(info: SessionInfo) -> dict:
    return {"properties": dict(info.properties), "sessionName": info.name, "node": info.node,
            "rest-url": info.url, "state-statements": info.state_statements,
            "moves": info.moves}


def results(cols: Any, rows: Any, row_format: str = "JSON") -> dict:
    """The `results` object of a fetch: the rows, each an INSERT of its fields."""
    return {"columns": list(cols), "rowFormat": row_format,
            "data": [{"kind": "INSERT", "fields": row} for row in rows]}


def result_json(page: ResultPage, path: str, row_format: str) -> dict:
    """Flink's FetchResultsResponseBody for a page; `path`: the result's URI up to the
    token (`.../operations/<handle>/result/`)."""
    def uri(token: int) -> str:
        return f"{path}{token}?rowFormat={row_format}"
    if not page.ready:
        return {"resultType": "NOT_READY", "isQueryResult": page.is_query,
                "resultKind": "SUCCESS_WITH_CONTENT", "results": results([], []),
                "nextResultUri": uri(page.token)}
    rows = page.rows
    if row_format == "PLAIN_TEXT":
        rows = [[None if v is None else str(v) for v in row] for row in rows]
    out = {"resultType": "EOS" if page.end else "PAYLOAD", "isQueryResult": page.is_query,
           "resultKind": "SUCCESS_WITH_CONTENT" if page.has_content else "SUCCESS",
           "results": results(page.columns, rows, row_format)}
    if not page.end:
        out["nextResultUri"] = uri(page.token + 1)
    return out


async def open_session(request: web.Request) -> web.Response:
    body = await sql_body(request)
    return web.json_response({"sessionHandle": await _sessions(request).open_session(
        body, caller(request))})


async def get_session(request: web.Request) -> web.StreamResponse:
    async def run() -> dict:
        return session_json(_sessions(request).session_info(request.match_info["sh"]))
    return await held_answer(request, run)


async def _keyed(key: str, answer: Awaitable[Any]) -> dict:
    """`{key: the gateway's answer}`."""
    return {key: await answer}


async def close_session(request: web.Request) -> web.StreamResponse:
    return await held_answer(request, lambda: _keyed(
        "status", _sessions(request).close_session(request.match_info["sh"])))


async def heartbeat(request: web.Request) -> web.StreamResponse:
    async def run() -> dict:
        await _sessions(request).heartbeat(request.match_info["sh"], is_forwarded(request))
        return {}
    return await held_answer(request, run)


def statement_id(request: web.Request) -> str:
    """The statement's request id, sent on to its session's holder: the client's
    X-Request-Id, else one made here (the peer the client reached), so that a statement
    sent again to the session's next holder, after its peer died with the statement
    perhaps recorded, is the same operation there (jm/cluster/sql/sqlgateway.py execute)."""
    rid = request.headers.get("X-Request-Id", "")
    if len(rid) > 128:
        raise ApiError(400, "X-Request-Id must be at most 128 characters")
    request[REQUEST_ID] = rid or f"jm-{uuid.uuid4().hex}"
    return request[REQUEST_ID]


MAX_PREFER_WAIT = 60.0  # seconds a statement's answer may be asked to wait for its rows


def preferences(headers: Any) -> dict[str, str]:
    """RFC 7240's Prefer header(s) as {name: value} (lower-case names)."""
    out = {}
    for header in headers.getall("Prefer", ()):
        for item in header.split(","):
            name, _, value = item.split(";")[0].strip().partition("=")
            if name:
                out[name.strip().lower()] = value.strip().strip('"')
    return out


def first_result_wait(request: web.Request) -> Optional[float]:
    """`Prefer: return=representation` (jm.client's sessions send it): the statement's
    answer carries its first result page too, waiting for it up to `wait=<seconds>`
    (at most MAX_PREFER_WAIT) or sql-gateway.fetch-wait. None: not asked (-1: no wait
    given)."""
    prefs = preferences(request.headers)
    if prefs.get("return") != "representation":
        return None
    if "wait" not in prefs:
        return -1.0
    try:
        wait = float(prefs["wait"])
    except ValueError:
        raise ApiError(400, f"Prefer: wait={prefs['wait']} is not a number of seconds")
    if not 0 <= wait <= MAX_PREFER_WAIT:
        raise ApiError(400, f"Prefer: wait must be from 0 to {MAX_PREFER_WAIT:g} seconds")
    return wait


async def execute(request: web.Request) -> web.StreamResponse:
    body = await sql_body(request, optional=False)
    request_id = statement_id(request)
    statements, sh, fwd = _statements(request), request.match_info["sh"], is_forwarded(request)
    wait = first_result_wait(request)
    if wait is None:
        return await held_answer(request, lambda: _keyed(
            "operationHandle", statements.execute(sh, body, fwd, request_id)))
    row_format = request.query.get("rowFormat", "JSON").upper()

    async def run() -> dict:
        op, page = await statements.execute_first(sh, body, fwd, request_id, row_format,
                                                  None if wait < 0 else wait)
        path = f"{_base(request)}/sessions/{sh}/operations/{op}/result/"
        return {"operationHandle": op, "result": result_json(page, path, row_format)}
    answer = await held_answer(request, run)
    answer.headers["Preference-Applied"] = "return=representation"
    return answer


async def configure(request: web.Request) -> web.StreamResponse:
    """v2's configure-session: run a session-defining statement and wait for it."""
    body = await sql_body(request, optional=False)
    gw, sh, fwd = _statements(request), request.match_info["sh"], is_forwarded(request)
    request_id = statement_id(request)

    async def run() -> dict:
        op = await gw.execute(sh, body, fwd, request_id)
        while True:
            page = await gw.fetch(sh, op, 0, "JSON", fwd)
            if page.ready:
                await gw.close_operation(sh, op, fwd)
                return {}
    return await held_answer(request, run)


async def complete_statement(request: web.Request) -> web.StreamResponse:
    """Flink's completion hints: `{"statement", "position"}` -> `{"candidates": [...]}`
    (a GET with a JSON body, as Flink's SQL Client sends it)."""
    body = await sql_body(request)
    completion = request.app[GATEWAY].sql.completion
    return await held_answer(request, lambda: _keyed("candidates", completion.complete(
        request.match_info["sh"], body, is_forwarded(request))))


async def status(request: web.Request) -> web.StreamResponse:
    async def run() -> dict:
        return {"status": _statements(request).status(
            request.match_info["sh"], request.match_info["oh"], is_forwarded(request))}
    return await held_answer(request, run)


async def cancel(request: web.Request) -> web.StreamResponse:
    return await held_answer(request, lambda: _keyed("status", _statements(request).cancel(
        request.match_info["sh"], request.match_info["oh"], is_forwarded(request))))


async def close_operation(request: web.Request) -> web.StreamResponse:
    statements = _statements(request)
    return await held_answer(request, lambda: _keyed("status", statements.close_operation(
        request.match_info["sh"], request.match_info["oh"], is_forwarded(request))))


async def fetch(request: web.Request) -> web.StreamResponse:
    try:
        token = int(request.match_info["token"])
        if token < 0:
            raise ValueError
    except ValueError:
        raise ApiError(400, f"result token {request.match_info['token']!r} is not a "
                            "non-negative integer")
    row_format = request.query.get("rowFormat", "JSON").upper()
    sh, oh = request.match_info["sh"], request.match_info["oh"]
    path = f"{_base(request)}/sessions/{sh}/operations/{oh}/result/"

    async def run() -> dict:
        page = await _statements(request).fetch(sh, oh, token, row_format, is_forwarded(request))
        return result_json(page, path, row_format)
    return await held_answer(request, run)


async def _start_http(app: web.Application) -> None:
    app[HTTP] = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None,
                                                                    sock_connect=3),
                                      json_serialize=json.dumps)


async def _stop_http(app: web.Application) -> None:
    await app[HTTP].close()


def add_routes(app: web.Application) -> None:
    app.on_startup.append(_start_http)
    app.on_cleanup.append(_stop_http)
    r = app.router
    for prefix in ("", "/v1", "/v2"):
        r.add_get(prefix + "/api_versions", api_versions)
        s = prefix + "/sessions"
        op = s + "/{sh}/operations/{oh}"
        r.add_get(prefix + "/info", info)
        if prefix:  # unprefixed: rest/livysessions.py's, for Livy's and Flink's clients
            r.add_post(s, open_session)
        r.add_get(s + "/{sh}", get_session)
        r.add_delete(s + "/{sh}", close_session)
        r.add_post(s + "/{sh}/heartbeat", heartbeat)
        r.add_post(s + "/{sh}/statements", execute)
        r.add_post(s + "/{sh}/configure-session", configure)
        r.add_get(s + "/{sh}/complete-statement", complete_statement)
        r.add_get(op + "/status", status)
        r.add_post(op + "/cancel", cancel)
        r.add_delete(op + "/cancel", cancel)
        r.add_delete(op + "/close", close_operation)
        r.add_delete(op, close_operation)
        r.add_get(op + "/result/{token}", fetch)
