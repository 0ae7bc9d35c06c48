"""Apache Livy's batch REST API (the part Airflow's Livy operator and Livy clients use), on
application-mode script jobs. The mapping is jm/wire/livy.py; the gateway does the work.

    POST   /batches             {"file", "args", "pyFiles", "conf", "name", ...} -> 201 batch
                                 (s3://, gs://, hdfs:// files are copied into artifacts first)
    GET    /batches[?from=&size=]
    GET    /batches/{id}        GET /batches/{id}/state        GET /batches/{id}/log
    DELETE /batches/{id}        (cancels the job)
    GET    /version
"""
from __future__ import annotations

from aiohttp import web

from jm.api import ApiError
from rest.middleware import MAX_BODY, MAX_SPEC, caller
from rest.requests import gw as _gw, int_or, json_body


def _batch(request: web.Request) -> tuple[str, dict]:
    raw = request.match_info["batch_id"]
    try:
        number = int(raw)
    except ValueError:
        raise ApiError(404, f"batch {raw!r} not found (batch ids are integers)")
    found = _gw(request).batches.get(number)
    if found is None:
        raise ApiError(404, f"batch {number} not found")
    return found


async def post_batch(request: web.Request) -> web.Response:
    spec_limit = request.app[MAX_SPEC]  # (a batch becomes a job spec: read no more)
    body = await json_body(request, limit=("jobmanager.spec.max-size", spec_limit)
                           if spec_limit <= request.app[MAX_BODY] else None)
    out = await _gw(request).batches.submit(body, request.headers.get("X-Request-Id", ""),
                                            caller(request))
    return web.json_response(out, status=201)


async def get_batches(request: web.Request) -> web.Response:
    start, size = int_or(request, "from", 0), int_or(request, "size", 20)
    return web.json_response(_gw(request).batches.list(start, size, caller(request)))


async def get_batch(request: web.Request) -> web.Response:
    job_id, batch = _batch(request)
    batch["log"] = (await _gw(request).batches.log(job_id, None, 10))["log"]
    return web.json_response(batch)


async def get_state(request: web.Request) -> web.Response:
    _, batch = _batch(request)
    return web.json_response({"id": batch["id"], "state": batch["state"]})


async def get_log(request: web.Request) -> web.Response:
    job_id, batch = _batch(request)
    out = await _gw(request).batches.log(job_id, int_or(request, "from", None),
                                         int_or(request, "size", None))
    return web.json_response({"id": batch["id"], **out})


async def delete_batch(request: web.Request) -> web.Response:
    job_id, batch = _batch(request)
    if batch["state"] not in ("success", "dead", "killed"):
        await _gw(request).jobs.cancel(job_id)
    return web.json_response({"msg": "deleted"})


async def version(request: web.Request) -> web.Response:
    return web.json_response(_gw(request).batches.version())


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_post("/batches", post_batch)
    r.add_get("/batches", get_batches)
    r.add_get("/batches/{batch_id}", get_batch)
    r.add_get("/batches/{batch_id}/state", get_state)
    r.add_get("/batches/{batch_id}/log", get_log)
    r.add_delete("/batches/{batch_id}", delete_batch)
    r.add_get("/version", version)
