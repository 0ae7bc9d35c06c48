"""Apache Flink REST compatibility: what Flink's own tools (the `flink` CLI's
RestClusterClient, the web UI's first call, Python REST clients) need beyond our routes.

- `/v1/...`: Flink's clients prefix every path with the API version; a request under /v1
  that matches no route of its own (the SQL gateway registers /v1 and /v2 itself) is
  served by the route without the prefix.
- `GET /config` (Flink's DashboardConfiguration) and `GET /jobs/{id}/status`
  (JobStatusInfo).
- Under /v1, Flink's exact answers where ours differ: `GET /v1/jobs/overview` lists only
  jobs whose id is a Flink JobID (32 hex digits: one other id would fail Flink's whole
  list), `PATCH /v1/jobs/{id}` answers `{}`.
- Flink's trigger bodies for savepoints and stop-with-savepoint: `cancel-job`, `formatType`,
  `drain`, `triggerId`, and Hadoop-style targets (`file://`, `s3://`, `gs://`, `hdfs://`:
  the gateway makes them canonical, jm/policy/jobs/fsuri.py, and refuses with a 400 what this
  cluster cannot write).

The decisions (`savepoint_request`, `termination_mode`, `unprefixed`,
`dashboard_config`) are pure functions; the handlers are a thin shell over the gateway.
"""
from __future__ import annotations

import re
import time
import uuid
from typing import Any, Optional

from aiohttp import web
from aiohttp.web_urldispatcher import MatchInfoError

from jm.api import ApiError
from rest.middleware import caller
from rest.requests import gw as _gw

TRIGGER_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$")
JOB_ID_RE = re.compile(r"^[0-9a-fA-F]{32}$")  # Flink's JobID: 16 bytes in hex (our default)
FORMAT_TYPES = ("CANONICAL", "NATIVE")  # Flink's SavepointFormatType; ours is one format
VERSION_PREFIX = "/v1"


# ---- decisions (pure) -----------------------------------------------------------------
def unprefixed(path: str) -> Optional[str]:
    """The path without Flink's /v1 version prefix, or None when it has none."""
    if path == VERSION_PREFIX or path.startswith(VERSION_PREFIX + "/"):
        return path[len(VERSION_PREFIX):] or "/"
    return None


def termination_mode(raw: Optional[str]) -> str:
    """PATCH /jobs/{id}?mode=: Flink's TerminationMode, in any case (Flink upper-cases it).
    Only cancel is supported; stop is POST /jobs/{id}/stop."""
    mode = (raw if raw is not None else "cancel").strip().lower()
    if mode == "cancel":
        return mode
    if mode == "stop":
        raise ApiError(400, "mode=stop is not supported (Flink deprecated it too); use "
                            "mode=cancel, or POST /jobs/{id}/stop for stop-with-savepoint")
    raise ApiError(400, f"unsupported mode {raw!r}; use mode=cancel")


def savepoint_request(body: Any, stop: bool) -> tuple[str, Optional[str], bool]:
    """Flink's trigger bodies -> (trigger id, target directory, stop?). Savepoints take
    target-directory and cancel-job (true: a savepoint, then the job ends: our
    stop-with-savepoint), stop takes targetDirectory and drain (both spellings of the
    target are accepted on both); formatType (CANONICAL or NATIVE, any case: our
    savepoints have one format) and triggerId (for safe retries) on both. JSON nulls are
    absent fields (Flink's client sends them)."""
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    known = {"target-directory", "targetDirectory", "triggerId", "formatType"}
    known.add("drain" if stop else "cancel-job")
    unknown = sorted(set(body) - known)
    errors = []
    if unknown:
        errors.append(f"unknown field(s): {', '.join(unknown)}")
    for flag in ("drain", "cancel-job"):
        if body.get(flag) is not None and not isinstance(body.get(flag), bool):
            errors.append(f"{flag} must be true or false")
    if body.get("drain") is True:
        errors.append("drain=true (end the job's event time) is not supported; "
                      "stop without it")
    key = "target-directory" if body.get("target-directory") is not None else "targetDirectory"
    target = body.get(key)  # a path or URI: the gateway makes it canonical (or a 400)
    if target is not None and (not isinstance(target, str) or not target.strip()):
        errors.append(f"{key} must be an absolute path or a URI (file://, s3://, gs://, "
                      f"hdfs://) every peer can write")
        target = None
    fmt = body.get("formatType")
    if fmt is not None and (not isinstance(fmt, str) or fmt.upper() not in FORMAT_TYPES):
        errors.append(f"formatType must be one of {', '.join(FORMAT_TYPES)}")
    trigger = body.get("triggerId")
    if trigger is not None and (not isinstance(trigger, str)
                                or not TRIGGER_ID_RE.fullmatch(trigger)):
        errors.append("triggerId must be 1-128 letters, digits, '-' or '_'")
    if errors:
        raise ApiError(400, *errors)
    return trigger or uuid.uuid4().hex, target, stop or body.get("cancel-job") is True


def dashboard_config(version: str, commit: str, offset_s: int, zone: str) -> dict:
    """Flink's DashboardConfiguration (GET /config, the web UI's first call)."""
    return {"refresh-interval": 3000, "timezone-name": zone,
            "timezone-offset": offset_s * 1000, "flink-version": version,
            "flink-revision": commit,
            "features": {"web-submit": False, "web-cancel": True, "web-rescale": False,
                         "web-history": False}}


# ---- handlers --------------------------------------------------------------------------
async def get_config(request: web.Request) -> web.Response:
    ov = _gw(request).views.overview()
    lt = time.localtime()
    return web.json_response(dashboard_config(ov.get("flink-version", ""),
                                              ov.get("flink-commit", ""), lt.tm_gmtoff or 0,
                                              lt.tm_zone or "UTC"))


async def get_job_status(request: web.Request) -> web.Response:
    job_id = request.match_info["job_id"]
    out = _gw(request).views.job_detail(job_id)
    if out is None:
        raise ApiError(404, f"job {job_id} not found")
    return web.json_response({"status": out["state"]})


async def get_jobs_overview_v1(request: web.Request) -> web.Response:
    """GET /v1/jobs/overview (Flink's MultipleJobsDetails): the jobs with Flink job ids."""
    from rest.app import json_blocks
    return await json_blocks(request, await _gw(request).views.jobs_overview(
        request.query, JOB_ID_RE.match, caller(request)))


async def patch_job_v1(request: web.Request) -> web.Response:
    """PATCH /v1/jobs/{id}: our cancel, answered with Flink's EmptyResponseBody (`{}`:
    Python clients take any other body for a refusal); unversioned, the answer names the
    job's state."""
    from rest.app import patch_job
    await patch_job(request)
    return web.json_response({}, status=202)


@web.middleware
async def v1_middleware(request: web.Request, handler):
    """/v1/<path> is <path> when no route of its own matches (Flink's clients' prefix)."""
    rest = unprefixed(request.path)
    if rest is None or not isinstance(request.match_info, MatchInfoError):
        return await handler(request)
    alias = request.clone(rel_url=request.rel_url.with_path(rest).with_query(
        request.rel_url.query))
    match = await request.app.router.resolve(alias)
    if isinstance(match, MatchInfoError):
        return await handler(request)  # the original 404/405
    match.add_app(request.app)
    match.freeze()
    alias._match_info = match  # what aiohttp's own dispatch sets
    return await match.handler(alias)


def add_routes(app: web.Application) -> None:
    """Flink's routes that ours lack, and the /v1 prefix for every route (call once, from
    make_app; routes added later are served under /v1 too: the prefix is resolved per
    request)."""
    r = app.router
    r.add_get("/config", get_config)
    r.add_get("/jobs/{job_id}/status", get_job_status)
    r.add_patch(VERSION_PREFIX + "/jobs/{job_id}", patch_job_v1)
    r.add_get(VERSION_PREFIX + "/jobs/overview", get_jobs_overview_v1)
    app.middlewares.append(v1_middleware)
