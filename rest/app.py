"""The REST API (aiohttp), served by every peer. Handlers only talk to a gateway.

Errors are always {"errors": [...]} with the right status. Writes return once the
Raft command is committed and applied on this peer (read-your-writes here).
"""
from __future__ import annotations

import logging
import os
from typing import Any, Callable, Optional

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from jm.api import ApiError
from jm.fastjson import dumps_ascii
from rest.gateway import Gateway
from rest.middleware import (  # (the app's keys and auth_middleware: imported from here)
    CLIENT_SSL, DETAILS, GATEWAY, MAX_BODY, MAX_SPEC, METRICS, PEER_CREDENTIAL, PUBLIC_HEALTH,
    add_index, auth_middleware, caller, consistency_middleware, errors_middleware,
    metrics_middleware, scope_middleware)
from rest.requests import gw, int_param, json_body

log = logging.getLogger("jm.rest")
STATIC = os.path.join(os.path.dirname(__file__), "static")


# more /healthz fields, set by the peer (the janitor's `disk-low`): warnings that leave
# "ok" and the status as they are
HEALTH_EXTRA: web.AppKey[list] = web.AppKey("health_extra", list)


async def healthz(request: web.Request) -> web.Response:
    h = gw(request).health.report()
    for extra in request.app.get(HEALTH_EXTRA, ()):
        h.update({k: v for k, v in extra().items() if k not in h})
    if not request.get(DETAILS, True):  # (paths, addresses: not for whoever can connect)
        h = {k: v for k, v in h.items() if k in PUBLIC_HEALTH}
        h["details"] = "send 'Authorization: Bearer <rest.auth.token>' for the rest"
    return web.json_response(h, status=200 if h.get("ok") else 503)


async def get_openapi(request: web.Request) -> web.Response:
    """The OpenAPI description of every route (rest/openapi.py)."""
    from rest.openapi import document
    return web.json_response(document())


async def readyz(request: web.Request) -> web.Response:
    """Readiness (a Kubernetes readinessProbe, a load balancer's check): the peer has
    joined the cluster (its registration is committed) and its lease is valid. Unlike
    /healthz it stays ready through a leader election shorter than the lease."""
    r = gw(request).health.readiness()
    return web.json_response(r, status=200 if r.get("ready") else 503)


async def get_overview(request: web.Request) -> web.Response:
    return web.json_response(gw(request).views.overview())


async def get_nodes(request: web.Request) -> web.Response:
    """The peers (every one by default: a cluster's peers are a short list)."""
    return web.json_response(gw(request).views.nodes_page(request.query, caller(request)))


async def post_job(request: web.Request) -> web.Response:
    spec_limit, body_limit = request.app[MAX_SPEC], request.app[MAX_BODY]
    spec = await json_body(request, limit=("jobmanager.spec.max-size", spec_limit)
                           if spec_limit <= body_limit else None)
    request_id = request.headers.get("X-Request-Id", "")
    if len(request_id) > 128:
        raise ApiError(400, "X-Request-Id must be at most 128 characters")
    out = await gw(request).jobs.submit(spec, request_id, None, caller(request))
    return web.json_response(out, status=202, dumps=dumps_ascii)


async def get_jobs(request: web.Request) -> web.Response:
    """A page of jobs, newest first (pages.DEFAULT_LIMIT by default; jm/policy/api/pages.py)."""
    return web.json_response(gw(request).views.jobs_page(request.query, caller(request)))


async def get_jobs_overview(request: web.Request) -> web.Response:
    """Flink's complete overview (its tools read every job); filters and a page on ask."""
    return await json_blocks(request, await gw(request).views.jobs_overview(request.query, None,
                                                                            caller(request)))


async def json_blocks(request: web.Request, blocks: list[bytes]) -> web.StreamResponse:
    """A large JSON answer written block by block (the loop serves others in between)."""
    resp = web.StreamResponse(headers={"Content-Type": "application/json"})
    resp.content_length = sum(len(b) for b in blocks)
    await resp.prepare(request)
    for block in blocks:
        await resp.write(block)
    await resp.write_eof()
    return resp


def _job_view(request: web.Request, view: Callable[[str], Optional[dict]]) -> dict:
    """`view` (a gateway method) of the job named in the path; 404 if there is none."""
    job_id = request.match_info["job_id"]
    out = view(job_id)
    if out is None:
        raise ApiError(404, f"job {job_id} not found")
    return out


async def get_job(request: web.Request) -> web.Response:
    return web.json_response(_job_view(request, gw(request).views.job_detail))


async def get_job_exceptions(request: web.Request) -> web.Response:
    return web.json_response(_job_view(request, gw(request).views.job_exceptions))


async def get_job_result(request: web.Request) -> web.Response:
    return web.json_response(_job_view(request, gw(request).views.job_result))


async def patch_job(request: web.Request) -> web.Response:
    from rest.flink import termination_mode
    termination_mode(request.query.get("mode"))  # Flink's: any case; 400 unless cancel
    state = await gw(request).jobs.cancel(request.match_info["job_id"])
    return web.json_response({"state": state}, status=202)


async def post_savepoint(request: web.Request) -> web.Response:
    from rest.flink import savepoint_request  # Flink's body: cancel-job, formatType, file://
    trigger, target, stop = savepoint_request(await json_body(request, optional=True), False)
    out = await gw(request).jobs.savepoint(request.match_info["job_id"], trigger, target,
                                           stop, caller(request))
    return web.json_response(out, status=202)


async def post_stop(request: web.Request) -> web.Response:
    from rest.flink import savepoint_request
    trigger, target, _ = savepoint_request(await json_body(request, optional=True), True)
    out = await gw(request).jobs.savepoint(request.match_info["job_id"], trigger, target,
                                           True, caller(request))
    return web.json_response(out, status=202)


async def get_savepoints(request: web.Request) -> web.Response:
    return web.json_response(_job_view(request, gw(request).views.job_savepoints))


async def get_savepoint(request: web.Request) -> web.Response:
    job_id, rid = request.match_info["job_id"], request.match_info["request_id"]
    _job_view(request, gw(request).views.job_savepoints)  # 404 for an unknown job first
    out = gw(request).views.savepoint_status(job_id, rid)
    if out is None:
        raise ApiError(404, f"job {job_id} has no savepoint request {rid}")
    return web.json_response(out)


async def get_job_logs(request: web.Request) -> web.Response:
    """An attempt's log (default: the latest attempt), from any peer. `tail=N`: the last N
    lines; `offset=B`: from byte B (follow with the answer's next-offset);
    `format=text` answers text/plain."""
    fmt = request.query.get("format", "json")
    if fmt not in ("json", "text"):
        raise ApiError(400, "format must be json or text")
    attempt = int_param(request, "attempt", 1)
    offset = int_param(request, "offset", 0) or 0
    tail = int_param(request, "tail", 0)
    if tail is not None and request.query.get("offset"):
        raise ApiError(400, "give tail or offset, not both")
    out = await gw(request).views.job_logs(request.match_info["job_id"], attempt, offset, tail,
                                           "local" in request.query)
    if fmt == "text":
        return web.Response(text=out.get("text", ""), content_type="text/plain",
                            headers={"X-Log-Next-Offset": str(out.get("next-offset", 0)),
                                     "X-Log-Node": str(out.get("node")),
                                     "X-Log-Attempt": str(out.get("attempt"))})
    return web.json_response(out)


async def get_metrics(request: web.Request) -> web.Response:
    """The peer's Prometheus registry: OpenMetrics if the scraper's Accept asks for
    application/openmetrics-text, else the classic text format; a credential of one
    tenant sees the per-job series (jm_job_*) of that tenant's jobs only."""
    metrics = request.app.get(METRICS)
    if metrics is None:
        return web.Response(text="", content_type="text/plain", charset="utf-8")
    who = caller(request)  # one tenant's credential: its own jobs' series only
    body, ctype = metrics.render(request.headers.get("Accept"),
                                 None if who.sees_all else who.tenant)
    return web.Response(body=body, headers={"Content-Type": ctype,
                                            "X-Content-Type-Options": "nosniff"})


async def post_artifact(request: web.Request) -> web.Response:
    if not request.content_type.startswith("multipart/"):
        raise ApiError(400, "upload artifacts as multipart/form-data with a file field")
    try:  # (a body that is not the multipart it says it is)
        filename, data = await _read_upload(request, request.app[MAX_BODY])
    except (ValueError, HttpProcessingError) as exc:
        why = getattr(exc, "message", None) or str(exc)
        raise ApiError(400, f"the upload is not valid multipart/form-data: {why}"[:300])
    out = await gw(request).artifacts.add(filename, data, caller(request))
    return web.json_response(out, status=201)


async def _read_upload(request: web.Request, limit: int) -> tuple[str, bytes]:
    reader = await request.multipart()
    part = await reader.next()
    while part is not None and not getattr(part, "filename", None):
        part = await reader.next()
    if part is None:
        raise ApiError(400, "the upload has no file part")
    data = bytearray()
    while True:
        chunk = await part.read_chunk(1 << 16)
        if not chunk:
            break
        data.extend(chunk)
        if len(data) > limit:
            raise ApiError(413, f"artifact too large (limit rest.max-body-size, {limit} bytes)")
    return part.filename, bytes(data)


async def get_artifacts(request: web.Request) -> web.Response:
    return web.json_response(gw(request).views.artifacts_page(request.query,
                                                              caller(request)))


async def get_artifact_content(request: web.Request) -> web.StreamResponse:
    path = gw(request).artifacts.file(request.match_info["artifact_id"])
    if path is None:
        raise ApiError(404, f"artifact {request.match_info['artifact_id']} is not stored here")
    return web.FileResponse(path)


async def delete_artifact(request: web.Request) -> web.Response:
    return web.json_response(await gw(request).artifacts.delete(
        request.match_info["artifact_id"], caller(request)))


async def index(request: web.Request) -> web.StreamResponse:
    """The web UI shell (it calls the REST API like any client)."""
    return web.FileResponse(os.path.join(STATIC, "index.html"))


def make_app(gateway: Gateway, max_body: int, token: Optional[str] = None,
             peer_credential: Optional[str] = None, metrics: Any = None,
             wait_timeout: float = 5.0, hosts: tuple = (), allowed_hosts: tuple = (),
             allowed_origins: tuple = (), client_ssl: Any = True) -> web.Application:
    """`hosts`: this peer's own names (conf/masters, the bind address); with the two
    `allowed_*` lists they decide which Host and Origin headers are answered (rest/guard)."""
    from rest.guard import guard_middleware
    # aiohttp's own limit is a little above ours so that our handlers answer 413 in JSON
    from rest.tenants import audit_middleware
    app = web.Application(middlewares=[metrics_middleware, audit_middleware,
                                       errors_middleware,
                                       guard_middleware(token, hosts, allowed_hosts,
                                                        allowed_origins),
                                       auth_middleware(token, peer_credential),
                                       consistency_middleware(wait_timeout),
                                       scope_middleware],
                          client_max_size=max_body + 1024)
    app.on_response_prepare.append(add_index)
    app[GATEWAY] = gateway
    app[PEER_CREDENTIAL] = peer_credential
    app[MAX_BODY] = max_body
    app[CLIENT_SSL] = client_ssl  # how this peer verifies others (rest.ssl.ca)
    # a job spec's own, smaller limit (the gateway's jobmanager.spec.max-size)
    spec_limit = getattr(gateway, "max_spec_size", None)
    app[MAX_SPEC] = spec_limit if isinstance(spec_limit, int) else max_body
    app[METRICS] = metrics
    r = app.router
    r.add_get("/", index)
    r.add_static("/static/", STATIC, follow_symlinks=False)
    r.add_get("/healthz", healthz)
    r.add_get("/openapi.json", get_openapi)
    r.add_get("/readyz", readyz)
    r.add_get("/overview", get_overview)
    r.add_get("/nodes", get_nodes)
    r.add_post("/jobs", post_job)
    r.add_get("/jobs", get_jobs)
    r.add_get("/jobs/overview", get_jobs_overview)
    r.add_get("/jobs/{job_id}", get_job)
    r.add_get("/jobs/{job_id}/exceptions", get_job_exceptions)
    r.add_get("/jobs/{job_id}/result", get_job_result)
    r.add_get("/jobs/{job_id}/logs", get_job_logs)
    r.add_get("/metrics", get_metrics)
    r.add_patch("/jobs/{job_id}", patch_job)
    r.add_post("/jobs/{job_id}/savepoints", post_savepoint)
    r.add_get("/jobs/{job_id}/savepoints", get_savepoints)
    r.add_get("/jobs/{job_id}/savepoints/{request_id}", get_savepoint)
    r.add_post("/jobs/{job_id}/stop", post_stop)
    r.add_post("/artifacts", post_artifact)
    r.add_get("/artifacts", get_artifacts)
    r.add_get("/artifacts/{artifact_id}/content", get_artifact_content)
    r.add_delete("/artifacts/{artifact_id}", delete_artifact)
    from rest import cluster, livy, livysessions, pipelines, sql, tenants, tokens
    cluster.add_routes(app)  # membership, drains, rebalancing, peer-to-peer beats
    tokens.add_routes(app)  # named credentials
    tenants.add_routes(app)  # tenants' quotas, the audit log
    pipelines.add_routes(app)  # named pipelines, upgraded in place
    livysessions.add_routes(app)  # Livy's interactive sessions (before Flink's /sessions)
    sql.add_routes(app)
    livy.add_routes(app)  # Apache Livy's batches (Airflow's Livy operator)
    from rest import flink  # Flink's /config, /jobs/{id}/status, the /v1 prefix
    flink.add_routes(app)
    return app
