"""The role each route needs (pure): read < submit < admin. Named credentials (`POST
/tokens`) carry one of them; `rest.auth.token`, the root credential, is admin.

* read: every view (jobs, logs, results, artifacts, sessions' results, metrics, members);
* submit: what makes or changes work (jobs, savepoints, stops, artifacts, Livy batches
  and sessions, SQL sessions and statements);
* admin: the cluster itself (members, drains, rebalancing) and the credentials.

`ROUTES` names every route the app serves (its path as registered, without Flink's `/v1`
or the SQL gateway's `/v2` prefix): tests/unit/test_roles.py fails for a route that is
not in it. A route not in it needs admin."""
from __future__ import annotations

from typing import Optional

from jm.api import ADMIN, RANK, READ, SUBMIT  # noqa: F401  (the ranking both sides use)

OPEN, PEERS = "open", "peers"   # no credential; the peer credential (rest/middleware.py)
PREFIXES = ("/v1/", "/v2/")

_SESSION, _OP = "/sessions/{sh}", "/sessions/{sh}/operations/{oh}"
_LIVY, _STATEMENT = "/sessions/{session_id}", "/sessions/{session_id}/statements"
ROUTES: dict[tuple[str, str], str] = {
    **{("GET", p): OPEN for p in ("/", "/healthz", "/readyz")},
    ("POST", "/cluster/beat"): PEERS, ("POST", "/cluster/voter"): PEERS,
    ("DELETE", "/cluster/voter"): PEERS,
    **{("GET", p): READ for p in (
        "/api_versions", "/artifacts", "/artifacts/{artifact_id}/content", "/batches",
        "/batches/{batch_id}", "/batches/{batch_id}/log", "/batches/{batch_id}/state",
        "/cluster/identity", "/cluster/peers", "/cluster/sessions", "/config", "/info",
        "/jobs", "/jobs/overview",
        "/jobs/{job_id}", "/jobs/{job_id}/exceptions", "/jobs/{job_id}/logs",
        "/jobs/{job_id}/result", "/jobs/{job_id}/savepoints",
        "/jobs/{job_id}/savepoints/{request_id}", "/jobs/{job_id}/status", "/metrics",
        "/nodes", "/openapi.json", "/overview", "/version", "/sessions", "/tenants",
        "/pipelines", "/pipelines/{pipeline}", _LIVY,
        _LIVY + "/log", _LIVY + "/state", _STATEMENT, _STATEMENT + "/{statement_id}",
        _SESSION, _SESSION + "/complete-statement", _OP + "/result/{token}",
        _OP + "/status")},
    **{(m, p): SUBMIT for m, p in (
        ("POST", "/artifacts"), ("DELETE", "/artifacts/{artifact_id}"),
        ("PUT", "/pipelines/{pipeline}"), ("DELETE", "/pipelines/{pipeline}"),
        ("POST", "/batches"), ("DELETE", "/batches/{batch_id}"), ("POST", "/jobs"),
        ("PATCH", "/jobs/{job_id}"), ("POST", "/jobs/{job_id}/savepoints"),
        ("POST", "/jobs/{job_id}/stop"), ("POST", "/sessions"), ("DELETE", _LIVY),
        ("POST", _STATEMENT), ("POST", _STATEMENT + "/{statement_id}/cancel"),
        ("DELETE", _SESSION), ("POST", _SESSION + "/configure-session"),
        ("POST", _SESSION + "/heartbeat"), ("POST", _SESSION + "/statements"),
        ("DELETE", _OP), ("DELETE", _OP + "/cancel"), ("POST", _OP + "/cancel"),
        ("DELETE", _OP + "/close"))},
    **{(m, p): ADMIN for m, p in (
        ("POST", "/cluster/peers"), ("DELETE", "/cluster/peers/{node}"),
        ("POST", "/cluster/peers/{node}/promote"), ("POST", "/cluster/rebalance"),
        ("POST", "/nodes/{node}/drain"), ("DELETE", "/nodes/{node}/drain"),
        ("GET", "/tokens"), ("POST", "/tokens"), ("DELETE", "/tokens/{name}"),
        ("PUT", "/tenants/{tenant}"), ("GET", "/audit"))},
}


def template(path: str) -> str:
    """A registered path without Flink's `/v1` or the gateway's `/v2` prefix."""
    for prefix in PREFIXES:
        if path.startswith(prefix):
            return path[len(prefix) - 1:]
    return path


def required(method: str, path: Optional[str]) -> str:
    """The role a request needs: `path` is its route's registered path (None: no route
    matched, the answer is a 404 and any credential may see it)."""
    if path is None:
        return READ
    if method == "HEAD":
        method = "GET"
    if path.startswith("/static/"):
        return OPEN
    return ROUTES.get((method, template(path)), ADMIN)


def allows(role: str, need: str) -> bool:
    return need == OPEN or RANK.get(role, 0) >= RANK.get(need, RANK[ADMIN] + 1)
