"""The OpenAPI 3.0 description of every REST route, served at GET /openapi.json.

Written here, next to the routes, and checked against the router by a test
(tests/unit/test_openapi.py: every route is described, every description is a route), so
it cannot drift. tests/integration/test_api_fuzz.py feeds it to schemathesis, which sends
generated requests (valid and invalid) to real peers: no answer may be a 5xx but a 503
with `{"errors": [...]}`, every error is `{"errors": [...]}`, no peer may crash.
"""
from __future__ import annotations

import re
from typing import Any, Optional

VERSION = "0.1.0"  # pyproject.toml's (checked by tests/unit/test_openapi.py)

SQL_PREFIXES = ("", "/v1", "/v2")  # Flink SQL Gateway's (rest/sql.py)
STRING, INT = {"type": "string"}, {"type": "integer"}
ANY_OBJECT = {"type": "object"}

_ERRORS = {"description": "an error: `{\"errors\": [...]}`", "content": {
    "application/json": {"schema": {
        "type": "object", "required": ["errors"],
        "properties": {"errors": {"type": "array", "items": STRING}}}}}}


def _query(name: str, schema: dict, what: str) -> dict:
    return {"name": name, "in": "query", "required": False, "schema": schema,
            "description": what}


PAGE = [_query("limit", {"type": "integer", "minimum": 1, "maximum": 1000}, "rows per page"),
        _query("offset", {"type": "integer", "minimum": 0}, "rows skipped")]
JOB_FILTERS = [_query("state", STRING, "comma-separated states"),
               _query("name", STRING, "job name"), _query("node", STRING, "node id"),
               _query("since", STRING, "ended or submitted since (ms)")]

SPEC = {"type": "object", "description": "a job spec (docs/guide/jobs.md, \"Job spec\")", "properties": {
    "entry": STRING, "script": STRING, "sql": STRING, "name": STRING, "jobid": STRING,
    "pyfiles": {"type": "array", "items": STRING}, "args": ANY_OBJECT,
    "argv": {"type": "array", "items": STRING}, "slots": INT,
    "job-type": {"type": "string", "enum": ["batch", "streaming"]},
    "restart-strategy": ANY_OBJECT, "spark-conf": ANY_OBJECT, "savepoint-path": STRING,
    "spark-mode": {"type": "string", "enum": ["connect", "classic"]},
    "tenant": STRING, "proxy-user": STRING}}
SAVEPOINT = {"type": "object", "properties": {"target-directory": STRING,
                                             "cancel-job": {"type": "boolean"}}}
PEER = {"type": "object", "required": ["peer"], "properties": {"peer": STRING}}
SESSION = {"type": "object", "properties": {"sessionName": STRING,
                                           "properties": {"type": "object",
                                                          "additionalProperties": STRING}}}
STATEMENT = {"type": "object", "required": ["statement"], "properties": {
    "statement": STRING, "executionConfig": ANY_OBJECT,
    "executionTimeout": INT}}
COMPLETE = {"type": "object", "required": ["statement", "position"], "properties": {
    "statement": STRING, "position": {"type": "integer", "minimum": 0}}}
TOKEN = {"type": "object", "required": ["name", "role"], "properties": {
    "name": STRING, "role": {"type": "string", "enum": ["read", "submit", "admin"]},
    "tenant": STRING}}
QUOTAS = {"type": "object", "properties": {"slots": {"type": "integer", "minimum": 0},
                                          "sessions": {"type": "integer", "minimum": 0}}}
LIVY_SESSION = {"type": "object", "properties": {
    "kind": {"type": "string", "enum": ["pyspark", "sql", "shared"]}, "name": STRING,
    "conf": {"type": "object", "additionalProperties": STRING}}}
LIVY_STATEMENT = {"type": "object", "required": ["code"], "properties": {
    "code": STRING, "kind": {"type": "string", "enum": ["pyspark", "sql"]}}}
BATCH = {"type": "object", "required": ["file"], "properties": {
    "file": STRING, "className": STRING, "name": STRING, "proxyUser": STRING,
    "args": {"type": "array", "items": STRING}, "pyFiles": {"type": "array", "items": STRING},
    "conf": {"type": "object", "additionalProperties": STRING}}}
UPLOAD = {"multipart/form-data": {"schema": {
    "type": "object", "required": ["file"],
    "properties": {"file": {"type": "string", "format": "binary"}}}}}


def _op(summary: str, query: tuple = (), body: Optional[dict] = None,
        media: Optional[dict] = None, ok: str = "200") -> dict:
    out: dict[str, Any] = {"summary": summary, "parameters": list(query),
                           "responses": {ok: {"description": "done"}, "default": _ERRORS}}
    if body is not None:
        out["requestBody"] = {"required": False,
                              "content": {"application/json": {"schema": body}}}
    if media is not None:
        out["requestBody"] = {"required": True, "content": media}
    return out


def _routes() -> dict[str, dict[str, dict]]:
    paths: dict[str, dict[str, dict]] = {
        "/": {"get": _op("the web UI")},
        "/openapi.json": {"get": _op("this description")},
        "/healthz": {"get": _op("health (open; details with the token)")},
        "/readyz": {"get": _op("readiness: joined, lease valid (open)")},
        "/overview": {"get": _op("the cluster at a glance")},
        "/config": {"get": _op("Flink's dashboard configuration")},
        "/metrics": {"get": _op("Prometheus metrics")},
        "/nodes": {"get": _op("the peers", tuple(PAGE))},
        "/nodes/{node}/drain": {"post": _op("drain a peer", (_query("deadline", STRING,
                                                                    "duration"),)),
                                "delete": _op("end a drain")},
        "/jobs": {"post": _op("submit a job", body=SPEC, ok="202"),
                  "get": _op("a page of jobs", tuple(PAGE + JOB_FILTERS))},
        "/jobs/overview": {"get": _op("Flink's job overview", tuple(PAGE + JOB_FILTERS))},
        "/v1/jobs/overview": {"get": _op("Flink's job overview (v1)",
                                         tuple(PAGE + JOB_FILTERS))},
        "/jobs/{job_id}": {
            "get": _op("a job"),
            "patch": _op("cancel a job", (_query("mode", STRING, "cancel"),), ok="202")},
        "/v1/jobs/{job_id}": {"patch": _op("cancel a job (Flink's v1)",
                                           (_query("mode", STRING, "cancel"),), ok="202")},
        "/jobs/{job_id}/status": {"get": _op("a job's state (Flink)")},
        "/jobs/{job_id}/exceptions": {"get": _op("a job's failures")},
        "/jobs/{job_id}/result": {"get": _op("a job's result")},
        "/jobs/{job_id}/logs": {"get": _op("an attempt's log", (
            _query("attempt", {"type": "integer", "minimum": 1}, "attempt number"),
            _query("offset", {"type": "integer", "minimum": 0}, "from byte"),
            _query("tail", {"type": "integer", "minimum": 0}, "last lines"),
            _query("format", {"type": "string", "enum": ["json", "text"]}, "answer type")))},
        "/jobs/{job_id}/savepoints": {
            "post": _op("trigger a savepoint", body=SAVEPOINT, ok="202"),
            "get": _op("a job's savepoints")},
        "/jobs/{job_id}/savepoints/{request_id}": {"get": _op("a savepoint request")},
        "/jobs/{job_id}/stop": {"post": _op("stop with a savepoint", body=SAVEPOINT,
                                            ok="202")},
        "/cluster/rebalance": {"post": _op("rebalance now")},
        "/cluster/peers": {"get": _op("the Raft members"),
                           "post": _op("add a member", body=PEER, ok="201")},
        "/cluster/peers/{node}": {"delete": _op("remove a member", ok="202")},
        "/cluster/peers/{node}/promote": {"post": _op("make a non-voter a voter")},
        "/cluster/identity": {"get": _op("this replica's cluster id and members")},
        "/cluster/sessions": {"get": _op("every open session: SQL gateway, Livy, Spark "
                                         "Connect (?kind=sql|livy|connect)")},
        "/cluster/beat": {"post": _op("a peer's heartbeat (peers only)", body=ANY_OBJECT)},
        "/cluster/voter": {"post": _op("start voting (peers only)", body=ANY_OBJECT),
                           "delete": _op("stop a voting start (peers only)")},
        "/artifacts": {"post": _op("upload an artifact", media=UPLOAD, ok="201"),
                       "get": _op("the artifacts", tuple(PAGE))},
        "/artifacts/{artifact_id}": {"delete": _op("delete an artifact no job names")},
        "/artifacts/{artifact_id}/content": {"get": _op("an artifact's bytes")},
        "/batches": {"post": _op("submit a Livy batch", body=BATCH, ok="201"),
                     "get": _op("Livy batches", (_query("from", INT, "first"),
                                                 _query("size", INT, "how many")))},
        "/batches/{batch_id}": {"get": _op("a Livy batch"),
                                "delete": _op("kill a Livy batch")},
        "/batches/{batch_id}/state": {"get": _op("a Livy batch's state")},
        "/batches/{batch_id}/log": {"get": _op("a Livy batch's log", (
            _query("from", INT, "first line"), _query("size", INT, "lines")))},
        "/version": {"get": _op("Livy's version answer")},
        "/tokens": {"post": _op("create a named credential (admin; its secret is in this "
                                "answer only)", body=TOKEN, ok="201"),
                    "get": _op("the named credentials, without secrets (admin)")},
        "/tokens/{name}": {"delete": _op("revoke a named credential (admin)")},
        "/pipelines": {"get": _op("the named pipelines: version, job, state")},
        "/pipelines/{pipeline}": {
            "put": _op("create (201), keep (200) or upgrade in place (202: stop with a "
                       "savepoint, start the new spec from it) a named pipeline",
                       body=SPEC),
            "get": _op("a pipeline: its versions (specs, jobs), a pending upgrade"),
            "delete": _op("forget a pipeline; its job is cancelled")},
        "/tenants": {"get": _op("the tenants: quotas and what each uses (a tenant's "
                                "credential: its own)")},
        "/tenants/{tenant}": {"put": _op("set a tenant's quotas (admin; 0: no limit)",
                                         body=QUOTAS)},
        "/audit": {"get": _op("the audit log of every live peer, merged by time, "
                              "newest last (admin)", (
            _query("limit", INT, "entries (default 100)"),
            _query("local", STRING, "the peer asked only"),
            _query("job", STRING, "entries naming this job"),
            _query("who", STRING, "entries of this credential"),
            _query("tenant", STRING, "entries of this tenant's credentials")))},
    }
    paths.update(_livy_sessions())
    for p in SQL_PREFIXES:
        s, op = p + "/sessions", p + "/sessions/{sh}/operations/{oh}"
        paths.update({
            p + "/api_versions": {"get": _op("SQL gateway API versions")},
            p + "/info": {"get": _op("SQL gateway info")},
            # (unprefixed POST /sessions: Livy's or Flink's, by its body: _livy_sessions)
            **({s: {"post": _op("open a SQL session", body=SESSION)}} if p else {}),
            s + "/{sh}": {"get": _op("a SQL session"), "delete": _op("close a SQL session")},
            s + "/{sh}/heartbeat": {"post": _op("keep a SQL session")},
            s + "/{sh}/statements": {"post": _op("run a statement", body=STATEMENT)},
            s + "/{sh}/configure-session": {"post": _op("run a configuring statement",
                                                         body=STATEMENT)},
            s + "/{sh}/complete-statement": {"get": _op(
                "completion hints at a position (a JSON body, as Flink's)", body=COMPLETE)},
            op + "/status": {"get": _op("an operation's status")},
            op + "/cancel": {"post": _op("cancel an operation"),
                             "delete": _op("cancel an operation")},
            op + "/close": {"delete": _op("close an operation")},
            op: {"delete": _op("close an operation")},
            op + "/result/{token}": {"get": _op("a page of results", (
                _query("rowFormat", {"type": "string", "enum": ["JSON", "PLAIN_TEXT"]},
                       "row format"),))},
        })
    return paths


def _livy_sessions() -> dict:
    """Livy's interactive sessions (integer ids; rest/livysessions.py)."""
    s, page = "/sessions/{session_id}", (_query("from", INT, "first"),
                                         _query("size", INT, "how many"))
    return {
        "/sessions": {
            "post": _op("open a Livy session (a body with `kind`), or a Flink SQL session",
                        body={"oneOf": [LIVY_SESSION, SESSION]}, ok="201"),
            "get": _op("Livy sessions", page)},
        s: {"get": _op("a Livy session"), "delete": _op("delete a Livy session")},
        s + "/state": {"get": _op("a Livy session's state")},
        s + "/log": {"get": _op("a Livy session's log", page)},
        s + "/statements": {"post": _op("run a Livy statement", body=LIVY_STATEMENT,
                                        ok="201"),
                            "get": _op("a Livy session's statements", page)},
        s + "/statements/{statement_id}": {"get": _op("a Livy statement")},
        s + "/statements/{statement_id}/cancel": {"post": _op("cancel a Livy statement")},
    }


def _with_path_parameters(paths: dict) -> dict:
    for path, ops in paths.items():
        names = re.findall(r"{(\w+)}", path)
        for op in ops.values():
            op["parameters"] = [{"name": n, "in": "path", "required": True, "schema": STRING}
                                for n in names] + op["parameters"]
    return paths


def document() -> dict:
    """The description (a fresh dict each call)."""
    return {"openapi": "3.0.3",
            "info": {"title": "JobManager cluster REST API", "version": VERSION,
                     "description": "Every peer serves every route (docs/reference/rest.md)."},
            "components": {"securitySchemes": {"bearer": {"type": "http",
                                                          "scheme": "bearer"}}},
            "security": [{"bearer": []}, {}],
            "paths": _with_path_parameters(_routes())}


def operations(doc: dict) -> set[tuple[str, str]]:
    """(METHOD, path) of every operation a description holds."""
    return {(method.upper(), path) for path, ops in doc["paths"].items() for method in ops}
