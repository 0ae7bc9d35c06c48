"""Named pipelines (GitOps): `PUT /pipelines/{pipeline}` with a job spec creates (201),
keeps (200, an unchanged spec) or upgrades in place (202: the running version stops with
a savepoint, the new one starts from it); `GET /pipelines`, `GET /pipelines/{pipeline}`
(its versions, for a rollback), `DELETE /pipelines/{pipeline}` (cancels its job)."""
from __future__ import annotations

from aiohttp import web

from jm.api import ApiError
from rest.middleware import MAX_BODY, MAX_SPEC, caller
from rest.requests import gw, json_body


async def put_pipeline(request: web.Request) -> web.Response:
    spec_limit, body_limit = request.app[MAX_SPEC], request.app[MAX_BODY]
    body = await json_body(request, limit=("jobmanager.spec.max-size", spec_limit)
                           if spec_limit <= body_limit else None)
    status, out = await gw(request).pipelines.put(request.match_info["pipeline"], body,
                                                  caller(request))
    return web.json_response(out, status=status)


async def get_pipelines(request: web.Request) -> web.Response:
    return web.json_response(gw(request).pipelines.list(caller(request)))


async def get_pipeline(request: web.Request) -> web.Response:
    name = request.match_info["pipeline"]
    out = gw(request).pipelines.get(name)
    if out is None:
        raise ApiError(404, f"pipeline {name} not found")
    return web.json_response(out)


async def delete_pipeline(request: web.Request) -> web.Response:
    return web.json_response(await gw(request).pipelines.delete(request.match_info["pipeline"]))


def add_routes(app: web.Application) -> None:
    app.router.add_put("/pipelines/{pipeline}", put_pipeline)
    app.router.add_get("/pipelines", get_pipelines)
    app.router.add_get("/pipelines/{pipeline}", get_pipeline)
    app.router.add_delete("/pipelines/{pipeline}", delete_pipeline)
