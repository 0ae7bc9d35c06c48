"""Tenants and the audit log. `PUT /tenants/{tenant} {"slots": N, "sessions": M}` sets a
tenant's quotas (admin), `GET /tenants` shows them with what each tenant uses (a tenant's
credential: its own), `GET /audit` (admin) the audit log: every write request a peer took
(`audit_middleware`), accepted or refused, with who sent it and what it named; the peer
asked merges its own entries with every other live peer's (`?local`: its own only)."""
from __future__ import annotations

import functools
import json
import re
import time

from aiohttp import web

from jm.api import FORWARDED
from rest.middleware import CALLER, GATEWAY, PEERS_ONLY, caller, forwarded_by_peer
from rest.requests import gw, json_body

WRITES = ("POST", "PUT", "PATCH", "DELETE")
QUIET = ("/heartbeat",)  # a session's keep-alive: not worth an entry each
MAX_SCAN = 64 * 1024  # an answer's body read for the job it made (POST /jobs, /batches)
MAX_FIELD = 256  # characters of a path or an id an entry keeps
# an answer as the gateway writes one that made a job ({"jobid": "...", ...}): read
# without parsing the whole body (any other shape is parsed)
_MADE = re.compile(rb'\{"jobid": ?"([^"\\]*)"[,}]')


def cut(text: str, limit: int = MAX_FIELD) -> str:
    """A request's path or id as an entry keeps it: at most `limit` characters."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


async def put_tenant(request: web.Request) -> web.Response:
    body = await json_body(request)
    return web.json_response(await gw(request).tenants.set(request.match_info["tenant"],
                                                           body))


async def get_tenants(request: web.Request) -> web.Response:
    return web.json_response(gw(request).tenants.list(caller(request)))


async def get_audit(request: web.Request) -> web.Response:
    return web.json_response(await gw(request).audit.entries(request.query))


@functools.lru_cache(maxsize=4)
def _second(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))


def stamp(now: float) -> str:
    """`now` (time.time()) as an entry's time: UTC ISO 8601 to the millisecond."""
    second = int(now)
    return f"{_second(second)}.{min(999, int((now - second) * 1000)):03d}Z"


def _made_job(body: bytes) -> str | None:
    """The job an answer says it made (its top-level "jobid"), if any."""
    fast = _MADE.match(body)
    if fast is not None:
        return fast.group(1).decode("utf-8", "replace")
    try:
        made = json.loads(body)
    except ValueError:
        return None
    return made["jobid"] if isinstance(made, dict) and isinstance(made.get("jobid"), str) \
        else None


def _entry(request: web.Request, status: int, body: bytes | None) -> dict:
    who = request.get(CALLER)
    entry = {"time": stamp(time.time()),
             "who": (who.name or "-") if who is not None else None,
             "role": who.role if who is not None else None,
             "tenant": who.tenant if who is not None else None,
             "method": request.method, "path": cut(request.path), "status": status,
             "remote": request.remote,
             "ids": {k: cut(v) for k, v in request.match_info.items()}}
    if FORWARDED in request.headers and not forwarded_by_peer(request):
        entry["forwarded"] = "unproven"  # (a client's, or a peer's without cluster.secret)
    if body and len(body) <= MAX_SCAN and b'"jobid"' in body and status < 300:
        made = _made_job(body)
        if made is not None:
            entry["job"] = made
    if "job" not in entry and "job_id" in entry["ids"]:
        entry["job"] = entry["ids"]["job_id"]
    return entry


@web.middleware
async def audit_middleware(request: web.Request, handler):
    """An audit entry for every write request this peer took (not the peers' own beats
    and votes, nor a request another peer passed on, with its peer credential to show for
    it: the peer that took it wrote the entry)."""
    if request.method not in WRITES or request.path in PEERS_ONLY \
            or forwarded_by_peer(request) or request.path.endswith(QUIET):
        return await handler(request)
    start = time.monotonic()
    status, body = 500, None
    try:
        resp = await handler(request)
        status = resp.status
        body = resp.body if isinstance(resp, web.Response) and \
            isinstance(resp.body, bytes) else None
        return resp
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        entry = _entry(request, status, body)
        entry["ms"] = round((time.monotonic() - start) * 1000, 1)
        gateway = request.app.get(GATEWAY)
        if gateway is not None:
            gateway.audit.record(entry)


def add_routes(app: web.Application) -> None:
    app.router.add_put("/tenants/{tenant}", put_tenant)
    app.router.add_get("/tenants", get_tenants)
    app.router.add_get("/audit", get_audit)
