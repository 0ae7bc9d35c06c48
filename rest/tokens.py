"""Named credentials (admin): `POST /tokens {"name", "role", "tenant"}` answers the
secret once (201), `GET /tokens` lists names, roles and tenants (never a secret), `DELETE
/tokens/{name}` revokes one. Roles: rest/roles.py."""
from __future__ import annotations

from aiohttp import web

from jm.api import ApiError
from rest.requests import gw, json_body

FIELDS = {"name", "role", "tenant"}


async def post_token(request: web.Request) -> web.Response:
    body = await json_body(request)
    if not isinstance(body, dict):
        raise ApiError(400, "the body must be a JSON object: {\"name\", \"role\", \"tenant\"}")
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise ApiError(400, f"unknown field(s): {', '.join(unknown)}")
    out = await gw(request).tokens.create(body.get("name"), body.get("role"),
                                          body.get("tenant"))
    return web.json_response(out, status=201)


async def get_tokens(request: web.Request) -> web.Response:
    return web.json_response({"tokens": gw(request).tokens.list()})


async def delete_token(request: web.Request) -> web.Response:
    name = request.match_info["name"]
    await gw(request).tokens.revoke(name)
    return web.json_response({"name": name, "revoked": True})


def add_routes(app: web.Application) -> None:
    app.router.add_post("/tokens", post_token)
    app.router.add_get("/tokens", get_tokens)
    app.router.add_delete("/tokens/{name}", delete_token)
