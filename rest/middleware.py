"""The REST layer's middlewares: bearer-token authentication (users' token, the peers'
credential), request metrics, errors as {"errors": [...]}, and the index protocol
(X-JM-Index / X-JM-Min-Index); and the keys the app is configured with."""
from __future__ import annotations

import hmac
import logging
import re
import time
from typing import Any, Optional

from aiohttp import web
from aiohttp.web_urldispatcher import MatchInfoError

from rest import roles
from jm.api import (ANYONE, FORWARDED, INDEX_HEADER, MIN_INDEX_HEADER, ROOT, ApiError, Credential,
                    Named)
from rest.gateway import Gateway

log = logging.getLogger("jm.rest")


GATEWAY: web.AppKey["Gateway"] = web.AppKey("gateway")
METRICS: web.AppKey[Any] = web.AppKey("metrics")
MAX_BODY: web.AppKey[int] = web.AppKey("max_body", int)
CLIENT_SSL: web.AppKey[Any] = web.AppKey("client_ssl")
MAX_SPEC: web.AppKey[int] = web.AppKey("max_spec", int)  # jobmanager.spec.max-size
PEER_CREDENTIAL: web.AppKey[Any] = web.AppKey("peer_credential")  # None without cluster.secret


def forward_mark(app: web.Application) -> str:
    """The X-JM-Forwarded value of a request this peer passes on: its peer credential
    (that the receiving peer knows it from a peer), or "1" without cluster.secret."""
    return app.get(PEER_CREDENTIAL) or "1"


def forwarded_by_peer(request: web.Request) -> bool:
    """A request another peer passed on, proven by its peer credential. Without
    cluster.secret there is none to show: no request is taken for one (a client's own
    X-JM-Forwarded proves nothing)."""
    secret = request.app.get(PEER_CREDENTIAL)
    given = request.headers.get(FORWARDED)
    return bool(secret and given) and hmac.compare_digest(
        given.encode("utf-8", "surrogateescape"), secret.encode())


def error_response(status: int, errors: list[str], headers: dict | None = None) -> web.Response:
    return web.json_response({"errors": errors}, status=status, headers=headers)


PEERS_ONLY = ("/cluster/beat", "/cluster/voter")  # the peer credential only
# what else peers ask each other: the users' token or the peer credential (no other route
# takes the peer credential: it is not a general bearer)
PEER_READS = ("/cluster/peers", "/cluster/identity")
PEER_DATA = re.compile(r"/artifacts/[^/]+/content")  # a copy of an artifact
PEER_LOGS = re.compile(r"/jobs/[^/]+/logs")  # with ?local: a log on the peer asked
# (and /audit?local: the audit entries of the peer asked, which the peer asked first merges)
DETAILS = web.RequestKey("jm_details", bool)  # the caller may see more than the basics
CALLER = web.RequestKey("jm_caller", Credential)  # who the request is (auth_middleware)
V1 = "/v1/"  # Flink's clients' prefix (rest/flink.py)
PUBLIC_HEALTH = ("ok", "node", "leader", "registered", "spark-ready")
OPEN_PATHS = ("/healthz", "/readyz")  # plus the web UI shell: "/" and /static/...


def auth_middleware(token: Optional[str], peer_credential: Optional[str]):
    """With rest.auth.token set, every endpoint but /healthz and the UI shell needs
    `Authorization: Bearer <token>`. Peers may show their credential instead (derived from
    cluster.secret by the peer, jm.policy.members.security.peer_credential, never the secret
    itself) on the routes peers call on each other, and only there: artifact content, a
    peer's own logs (`?local`), the membership and identity reads; a stolen peer
    credential submits no job. With only cluster.secret set, the peer-to-peer data routes
    need the peer credential. Heartbeats (POST /cluster/beat) and voter changes need the
    peer credential whenever cluster.secret is set: the users' token cannot keep a dead
    peer alive."""
    secret = peer_credential
    accepted = [t.encode() for t in (token, peer_credential) if t]
    users = [token.encode()] if token else []
    peers_only = [secret.encode()] if secret else accepted

    def allowed(request: web.Request, tokens: list) -> bool:
        header = request.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not given.strip():
            return False
        try:  # (a header that is not UTF-8 arrives with surrogates: it matches no token)
            given_b = given.strip().encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            return False
        return any(hmac.compare_digest(given_b, t) for t in tokens)

    @web.middleware
    async def middleware(request: web.Request, handler):
        path = request.path
        if path in OPEN_PATHS or path == "/" or path.startswith("/static/"):
            request[DETAILS] = not token or allowed(request, accepted)
            return await handler(request)
        internal = request.method in ("GET", "HEAD") and (
            PEER_DATA.fullmatch(path) is not None
            or ("local" in request.query and (PEER_LOGS.fullmatch(path) is not None
                                              or path == "/audit")))
        if path in PEERS_ONLY:  # heartbeats, promotions: only peers (not the users' token)
            if (token or secret) and not allowed(request, peers_only):
                return error_response(401, [f"{path} is for the cluster's peers: send "
                                            "'Authorization: Bearer <peer credential>'"],
                                      {"WWW-Authenticate": 'Bearer realm="jobmanager"'})
            return await handler(request)
        tokens = accepted if internal or path in PEER_READS else users
        if not (token or (secret and internal)) or allowed(request, tokens):
            request[CALLER] = ROOT if token else ANYONE
        else:
            try:
                named = await _named(request) if token else None
            except Exception as exc:  # the JWT's verifier says why it is no credential
                if getattr(exc, "bearer_refused", False):
                    return _unauthorized(str(exc), "invalid_token")
                raise
            if named is None:
                return _unauthorized("missing or wrong credentials: send 'Authorization: "
                                     "Bearer <rest.auth.token, or a token of jm token "
                                     "create>'", "invalid_token"
                                     if request.headers.get("Authorization") else None)
            request[CALLER] = named
            route, params = await _route(request)
            needed = roles.required(request.method, route)
            if not roles.allows(named.role, needed):
                why = f"the {named.role or 'empty'} role may not do this"
                return error_response(403, [why], {"WWW-Authenticate": _challenge(
                    "insufficient_scope", why)})
            if not named.sees_all:  # checked after the index wait (scope_middleware)
                request[SCOPED] = {NAMED[k]: v for k, v in params.items() if k in NAMED}
        return await handler(request)
    return middleware


# what a route's path parameter names, and the answer for one of another tenant: the
# same as for one that does not exist (nothing else said)
HIDDEN = {Named.JOB: "job {} not found", Named.BATCH: "batch {} not found",
          Named.LIVY_SESSION: "session {} not found (deleted, expired or never created)",
          Named.SQL_SESSION: "session {} does not exist",
          Named.ARTIFACT: "unknown artifact {}", Named.PIPELINE: "pipeline {} not found"}
NAMED = {n.value: n for n in Named}  # a path parameter's name -> what it names


SCOPED = web.RequestKey("jm_scoped", dict)  # the path's objects a tenant's caller names
CREATED_BY_PATH = (("PUT", Named.PIPELINE),)  # a request that names what it creates


@web.middleware
async def scope_middleware(request: web.Request, handler):
    """A tenant's credential reaches only its tenant's jobs, batches, sessions, pipelines
    and artifacts; another tenant's answer the same 404 as none. Checked after the index
    wait (consistency_middleware runs first) against the objects as this replica has them
    then: an object it does not know yet is looked for once more after one Raft barrier
    (created through another peer an instant ago) and is a 404 if still unknown, never
    let through to a handler that might find it later as another tenant's."""
    scoped = request.get(SCOPED)
    if scoped:
        hidden = await _hidden(request, scoped, caller(request))
        if hidden is not None:
            return error_response(404, [hidden])
    return await handler(request)


async def _hidden(request: web.Request, params: dict, who: Credential) -> Optional[str]:
    """The 404 answer when an object the path names is another tenant's than `who`'s or
    unknown (a name a PUT creates may be unknown), else None."""
    gw = request.app[GATEWAY]
    for named, value in params.items():
        seen = gw.tenants.visible(named, value, who)
        if seen is None and (request.method, named) in CREATED_BY_PATH:
            continue
        if seen is None and FORWARDED not in request.headers:
            await gw.sql.sessions.catch_up()  # (a forwarded request waited for its sender's index)
            seen = gw.tenants.visible(named, value, who)
        if not seen:
            return HIDDEN[named].format(value)
    return None


def _challenge(error: Optional[str], description: str) -> str:
    """RFC 6750's WWW-Authenticate: the realm, and the error with its description when
    a credential was sent (none for a request without one)."""
    if error is None:
        return 'Bearer realm="jobmanager"'
    text = description.replace("\\", "").replace('"', "'")[:300]
    return f'Bearer realm="jobmanager", error="{error}", error_description="{text}"'


def _unauthorized(why: str, error: Optional[str]) -> web.Response:
    return error_response(401, [why], {"WWW-Authenticate": _challenge(error, why)})


def caller(request: web.Request) -> Credential:
    """Who the request is (set by the auth middleware; ANYONE without one)."""
    return request.get(CALLER, ANYONE)


async def _named(request: web.Request) -> Optional[Credential]:
    """The credential the request's bearer is (a named one, POST /tokens, or a JWT), or
    None (a JWT that is none: the verifier's exception, `bearer_refused`)."""
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return None
    return await request.app[GATEWAY].tokens.credential(given.strip())


async def _route(request: web.Request) -> tuple[Optional[str], dict]:
    """The path the request's route was registered with (None: no route matched) and its
    path parameters. A /v1/<path> without a route of its own is <path>'s (Flink's
    prefix, served by rest/flink.py's v1_middleware after this one), and needs its role."""
    match = request.match_info
    if isinstance(match, MatchInfoError) and request.path.startswith(V1):
        alias = request.clone(rel_url=request.rel_url.with_path(request.path[len(V1) - 1:]))
        resolved = await request.app.router.resolve(alias)
        if not isinstance(resolved, MatchInfoError):
            match = resolved
    resource = match.route.resource
    return (resource.canonical if resource is not None else None), dict(match)


@web.middleware
async def metrics_middleware(request: web.Request, handler):
    start = time.perf_counter()
    status = 500
    try:
        resp = await handler(request)
        status = resp.status
        return resp
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        metrics = request.app.get(METRICS)
        if metrics is not None:
            route = request.match_info.route.resource
            name = route.canonical if route is not None else "unmatched"
            metrics.observe_rest(request.method, name, status, time.perf_counter() - start)


@web.middleware
async def errors_middleware(request: web.Request, handler):
    try:
        return await handler(request)
    except ApiError as exc:
        return error_response(exc.status, exc.errors, exc.headers)
    except web.HTTPRequestEntityTooLarge as exc:
        return error_response(413, [f"request body too large (limit rest.max-body-size, "
                                    f"{exc.max_size} bytes)"])
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        reason = exc.reason or "error"
        if exc.status == 404:
            reason = f"no such resource: {request.method} {request.path}"
        elif exc.status == 405:
            reason = f"method {request.method} not allowed on {request.path}"
        return error_response(exc.status, [reason])
    except Exception as exc:
        status = getattr(exc, "http_status", None)  # an error that says what it means
        if isinstance(status, int) and 400 <= status < 500:
            return error_response(status, [str(exc)])
        log.exception("internal error on %s %s", request.method, request.path)
        return error_response(500, ["internal server error; see the peer's log"])


def consistency_middleware(wait_timeout: float):
    """Read what anyone acknowledged, on any peer (the index protocol of Consul and Nomad):
    every answer carries the index this peer has applied (`X-JM-Index`, added when the
    response is prepared, so a write's answer carries an index at or after the write);
    a request with `X-JM-Min-Index: N` is answered only once this peer has applied N,
    waiting at most `wait_timeout` (rest.write-timeout), else 503 with Retry-After."""
    @web.middleware
    async def middleware(request: web.Request, handler):
        raw = request.headers.get(MIN_INDEX_HEADER)
        if raw is not None:
            try:
                want = int(raw.strip())
                if want < 0:
                    raise ValueError
            except ValueError:
                raise ApiError(400, f"{MIN_INDEX_HEADER} must be a non-negative integer "
                                    f"(an {INDEX_HEADER} you were sent), not {raw!r}")
            gw = request.app[GATEWAY]
            if not await gw.replica.wait_applied(want, wait_timeout):
                applied = gw.replica.applied_index()
                raise ApiError(503, f"this peer has applied index {applied}, not yet "
                                    f"{want} ({MIN_INDEX_HEADER}); retry, or ask another peer",
                               headers={"Retry-After": "1"})
        return await handler(request)
    return middleware


async def add_index(request: web.Request, response: web.StreamResponse) -> None:
    gw = request.app.get(GATEWAY)
    if gw is not None:
        response.headers[INDEX_HEADER] = str(gw.replica.applied_index())
