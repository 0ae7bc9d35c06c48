"""Tenants through real peers (in-process, real Raft and aiohttp, real job processes):
jobs, sessions and artifacts carry their tenant and submitter; a tenant's credential sees
and touches its own only (another tenant's answer the same 404 as none); a tenant at its
slot quota waits CREATED with the reason shown while another tenant's job runs; a
session over the session quota is a 429; the audit log says who did what; jobs run as a
proxy user only where jobmanager.executor.proxy-users allows it."""
import os
import pwd

import pytest
from prometheus_client.parser import text_string_to_metric_families as parse_text

from tests.conftest import running
from tests.helpers import ahttp, apoll
from tests.integration.test_cli import jm

ROOT = "root-token"
FIX = os.path.dirname(os.path.abspath(__file__)) + "/"
WAIT = {"entry": "jobs_fixture:wait_for_stop", "pyfiles": [FIX]}
STREAMING = {"job-type": "streaming"}  # (per-job metrics are a streaming job's)


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


async def _tokens(c) -> dict:
    out = {}
    for name, role, tenant in (("a-sub", "submit", "a"), ("a-read", "read", "a"),
                               ("b-sub", "submit", "b"), ("ops", "admin", None)):
        s, b = await ahttp("POST", c.url(0) + "/tokens", {"name": name, "role": role,
                                                          "tenant": tenant},
                           headers=bearer(ROOT))
        assert s == 201, b
        out[name] = bearer(b["token"])
    return out


async def _state(c, peer, jid, headers, want):
    seen = {}

    async def reached():
        s, b = await ahttp("GET", c.url(peer) + f"/jobs/{jid}", headers=headers)
        seen["job"] = b
        return b if s == 200 and b["state"] == want else None
    try:
        return await apoll(reached, 60, what=f"job {jid} {want}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the job: {seen.get('job')}") from None


async def _submit(c, peer, headers, **extra):
    s, b = await ahttp("POST", c.url(peer) + "/jobs", {**WAIT, **extra}, headers=headers)
    assert s == 202, b
    return b["jobid"]


async def _job_series(c, headers) -> set:
    """(job, tenant) of the jm_job_up series on every peer's /metrics."""
    seen = set()
    for i in range(len(c.peers)):
        s, text = await ahttp("GET", c.url(i) + "/metrics", headers=headers)
        assert s == 200, text
        seen |= {(x.labels["job"], x.labels["tenant"]) for f in parse_text(text)
                 for x in f.samples if x.name == "jm_job_up"}
    return seen


async def test_a_tenant_sees_its_own_work_and_waits_at_its_quota_while_another_runs(tmp_path):
    async with running(str(tmp_path), 2, {"rest.auth.token": ROOT}) as c:
        t = await _tokens(c)
        rc, out, err = await jm("-a", c.url(1), "tenant", "set", "a", "--slots", "1",
                                "--sessions", "1", env={"JM_TOKEN": ROOT})
        assert rc == 0 and "slots 1" in out, (out, err)
        a1 = await _submit(c, 0, t["a-sub"], **STREAMING)
        await _state(c, 1, a1, t["a-sub"], "RUNNING")
        a2 = await _submit(c, 1, t["a-sub"])
        b1 = await _submit(c, 1, t["b-sub"], **STREAMING)
        await _state(c, 0, b1, t["b-sub"], "RUNNING")  # another tenant still runs
        # per-job metrics: a tenant's credential scrapes its own jobs' series only
        assert await _job_series(c, t["a-read"]) == {(a1, "a")}
        assert await _job_series(c, t["ops"]) == {(a1, "a"), (b1, "b")}
        s, job = await ahttp("GET", c.url(0) + f"/jobs/{a2}", headers=t["a-read"])
        assert s == 200 and job["state"] == "CREATED", job
        assert "tenant a holds 1 of its 1 slots" in job["waiting"], job
        assert (job["tenant"], job["submitter"]) == ("a", "a-sub")
        rc, out, err = await jm("-a", c.url(1), "status", a2, env={"JM_TOKEN": ROOT})
        assert rc == 0 and "CREATED: tenant a holds 1 of its 1 slots" in out, (out, err)
        # lists: a tenant's own; an admin's: every one
        for path in ("/jobs", "/jobs/overview", "/v1/jobs/overview"):
            s, b = await ahttp("GET", c.url(1) + path, headers=t["a-read"])
            assert s == 200 and {j.get("jid", j.get("id")) for j in b["jobs"]} == {a1, a2}, b
            s, b = await ahttp("GET", c.url(1) + path, headers=t["ops"])
            assert {j.get("jid", j.get("id")) for j in b["jobs"]} == {a1, a2, b1}, b
        # another tenant's job: the answer for none, whatever the route
        for method, path in (("GET", f"/jobs/{b1}"), ("GET", f"/v1/jobs/{b1}"),
                             ("GET", f"/jobs/{b1}/logs"), ("PATCH", f"/jobs/{b1}"),
                             ("POST", f"/jobs/{b1}/stop")):
            s, b = await ahttp(method, c.url(0) + path, {} if method == "POST" else None,
                               headers=t["a-sub"])
            assert s == 404 and b == {"errors": [f"job {b1} not found"]}, (path, s, b)
        s, b = await ahttp("GET", c.url(0) + f"/jobs/{b1}", headers=t["ops"])
        assert s == 200 and b["state"] == "RUNNING"
        s, b = await ahttp("POST", c.url(0) + "/jobs", {**WAIT, "tenant": "b"},
                           headers=t["a-sub"])
        assert s == 403 and b["errors"], b
        # the tenants' view: a tenant's own row, an admin's every row
        s, b = await ahttp("GET", c.url(0) + "/tenants", headers=t["a-read"])
        assert s == 200 and [(r["name"], r["slots"], r["slots-used"], r["jobs-over-quota"])
                             for r in b["tenants"]] == [("a", 1, 1, 1)], b
        s, b = await ahttp("GET", c.url(0) + "/tenants", headers=t["ops"])
        assert {r["name"]: r["slots-used"] for r in b["tenants"]} == {"a": 1, "b": 1}, b
        # a's first job ends: its second one goes
        s, b = await ahttp("PATCH", c.url(0) + f"/jobs/{a1}", headers=t["a-sub"])
        assert s == 202, b
        await _state(c, 0, a2, t["a-sub"], "RUNNING")
        for jid, who in ((a2, "a-sub"), (b1, "b-sub")):
            s, b = await ahttp("PATCH", c.url(1) + f"/jobs/{jid}", headers=t[who])
            assert s == 202, b
        # sessions: over a's quota a 429 with Retry-After; b's still open
        s, b = await ahttp("POST", c.url(0) + "/v1/sessions", {}, headers=t["a-sub"])
        assert s == 200, b
        for path, body in (("/v1/sessions", {}), ("/sessions", {"kind": "sql"})):
            s, b, h = await ahttp("POST", c.url(1) + path, body, headers=t["a-sub"],
                                  with_headers=True)
            assert s == 429 and "tenant a holds 1 sessions" in b["errors"][0], (path, s, b)
            assert int(h["Retry-After"]) > 0
        s, b = await ahttp("POST", c.url(1) + "/v1/sessions", {}, headers=t["b-sub"])
        assert s == 200, b
        b_session = b["sessionHandle"]
        # every session listed with its tenant: a tenant's credential sees its own only
        s, b = await ahttp("GET", c.url(1) + "/cluster/sessions", headers=t["b-sub"])
        assert s == 200 and [(x["kind"], x["id"], x["tenant"]) for x in b["sessions"]] == \
            [("sql", b_session, "b")], b
        s, b = await ahttp("GET", c.url(1) + "/cluster/sessions?kind=bogus",
                           headers=bearer(ROOT))
        assert s == 400 and "kind must be one of" in b["errors"][0], b
        rc, out, err = await jm("--address", c.url(0), "sessions", "--kind", "sql",
                                env={"JM_TOKEN": ROOT})
        assert rc == 0 and b_session in out and out.startswith("KIND"), (out, err)
        lines = [ln.split() for ln in out.splitlines()[1:]]
        assert sorted(ln[2] for ln in lines) == ["a", "b"], out
        await _audit_and_bad_input(c, t, a1, a2)


async def _audit_and_bad_input(c, t, a1, a2):
    for body in ({"slots": -1}, {"slots": "2"}, {"bogus": 1}, {}, [1]):
        s, b = await ahttp("PUT", c.url(0) + "/tenants/a", body, headers=bearer(ROOT))
        assert s == 400 and b["errors"], (body, s, b)
    s, b = await ahttp("PUT", c.url(0) + "/tenants/bad%20name", {"slots": 1},
                       headers=bearer(ROOT))
    assert s == 400 and b["errors"], b
    s, b = await ahttp("PUT", c.url(0) + "/tenants/a", {"slots": 1}, headers=t["a-sub"])
    assert s == 403, b
    rc, out, err = await jm("-a", c.url(0), "tenant", "set", "a", env={"JM_TOKEN": ROOT})
    assert rc != 0 and err.startswith("jm: ") and len(err.splitlines()) == 1, err
    # the audit log, each entry from the peer that took the request: who, what, which
    # job; any peer answers with every live peer's entries (?local: its own only)
    s, b = await ahttp("GET", c.url(0) + "/audit?limit=1000", headers=t["ops"])
    assert s == 200 and sorted(b["peers"]) == sorted(p.node for p in c.peers), b
    assert b["unreachable"] == [], b
    mine = [e for e in b["entries"] if e.get("job") == a1]
    assert [(e["who"], e["method"], e["status"]) for e in mine] == [
        ("a-sub", "POST", 202), ("a-sub", "PATCH", 202)], mine
    assert [e["time"] for e in b["entries"]] == sorted(e["time"] for e in b["entries"])
    # a2 was sent to peer 1 and stopped there: its entries come from peer 1
    s, b2 = await ahttp("GET", c.url(0) + f"/audit?job={a2}", headers=t["ops"])
    assert s == 200 and [(e["peer"], e["method"], e["status"]) for e in b2["entries"]] == [
        (c.peers[1].node, "POST", 202), (c.peers[1].node, "PATCH", 202)], b2
    s, b2 = await ahttp("GET", c.url(0) + f"/audit?job={a2}&local=1", headers=t["ops"])
    assert s == 200 and b2["entries"] == [] and b2["peers"] == [c.peers[0].node], b2
    s, b2 = await ahttp("GET", c.url(0) + "/audit?local=1", headers=t["a-read"])
    assert s == 403, b2
    assert any(e["who"] == "a-sub" and e["status"] == 403 and e["path"] == "/jobs"
               for e in b["entries"]), b["entries"]
    assert any(e["path"] == "/tenants/a" and e["who"] == "a-sub" and e["status"] == 403
               for e in b["entries"])
    rc, out, err = await jm("-a", c.url(0), "audit", "--job", a1, env={"JM_TOKEN": ROOT})
    assert rc == 0 and out.count("a-sub") == 2 and a1 in out, (out, err)
    s, b = await ahttp("GET", c.url(0) + "/audit", headers=t["a-sub"])
    assert s == 403


async def test_artifacts_and_livy_batches_are_their_tenant_s(tmp_path):
    async with running(str(tmp_path), 1, {"rest.auth.token": ROOT}) as c:
        t = await _tokens(c)
        rc, out, err = await jm("-a", c.url(0), "upload", FIX + "jobs_fixture.py",
                                env={"JM_TOKEN": (await _secret(c, "a-up"))})
        assert rc == 0, (out, err)
        s, b = await ahttp("GET", c.url(0) + "/artifacts", headers=t["a-read"])
        assert s == 200 and len(b["artifacts"]) == 1 and b["artifacts"][0]["tenants"] == ["a"]
        art = b["artifacts"][0]["id"]
        s, b = await ahttp("GET", c.url(0) + "/artifacts", headers=t["b-sub"])
        assert s == 200 and b["artifacts"] == [], b
        s, b = await ahttp("GET", c.url(0) + f"/artifacts/{art}/content", headers=t["b-sub"])
        assert s == 404 and b == {"errors": [f"unknown artifact {art}"]}, b
        s, b = await ahttp("GET", c.url(0) + f"/artifacts/{art}/content", headers=t["a-read"])
        assert s == 200
        # the same bytes uploaded by b: one artifact, two claims; a's DELETE takes a's only
        b_up = await _secret(c, "b-up", "b")
        rc, out, err = await jm("-a", c.url(0), "upload", FIX + "jobs_fixture.py",
                                env={"JM_TOKEN": b_up})
        assert rc == 0, (out, err)
        s, b = await ahttp("GET", c.url(0) + "/artifacts", headers=t["ops"])
        assert [x["tenants"] for x in b["artifacts"]] == [["a", "b"]], b
        s, b = await ahttp("DELETE", c.url(0) + f"/artifacts/{art}", headers=t["a-sub"])
        assert s == 200, b
        s, b = await ahttp("GET", c.url(0) + f"/artifacts/{art}/content", headers=t["b-sub"])
        assert s == 200  # b's still
        s, b = await ahttp("GET", c.url(0) + f"/artifacts/{art}/content", headers=t["a-read"])
        assert s == 404, b
        s, b = await ahttp("DELETE", c.url(0) + f"/artifacts/{art}", headers=t["a-sub"])
        assert s == 404, b  # nothing of a's left to take
        # a Livy batch: its owner is its submitter, and only its tenant sees it
        s, b = await ahttp("POST", c.url(0) + "/batches",
                           {"file": FIX + "jobs_fixture.py"}, headers=t["b-sub"])
        assert s in (200, 201) and b["owner"] == "b-sub", b
        batch = b["id"]
        s, b = await ahttp("GET", c.url(0) + "/batches", headers=t["a-read"])
        assert s == 200 and b["sessions"] == [], b
        s, b = await ahttp("GET", c.url(0) + f"/batches/{batch}", headers=t["a-read"])
        assert s == 404 and b == {"errors": [f"batch {batch} not found"]}, b
        s, b = await ahttp("GET", c.url(0) + "/batches", headers=t["ops"])
        assert [x["id"] for x in b["sessions"]] == [batch]
        # a named pipeline: its tenant's (a name another tenant took is a conflict)
        s, b = await ahttp("PUT", c.url(0) + "/pipelines/etl", {"entry": "jobs_fixture:quick",
                                                                "pyfiles": [FIX]},
                           headers=t["a-sub"])
        assert s == 201, b
        s, b = await ahttp("GET", c.url(0) + f"/jobs/{b['jobid']}", headers=t["a-read"])
        assert s == 200 and b["tenant"] == "a"
        for method, body in (("GET", None), ("PUT", {"entry": "jobs_fixture:quick"}),
                             ("DELETE", None)):
            s, b = await ahttp(method, c.url(0) + "/pipelines/etl", body, headers=t["b-sub"])
            assert s == 404 and b == {"errors": ["pipeline etl not found"]}, (method, s, b)
        s, b = await ahttp("GET", c.url(0) + "/pipelines", headers=t["b-sub"])
        assert b == {"pipelines": []}


async def test_a_tenant_cannot_reach_another_s_object_by_waiting_for_it_to_exist(tmp_path):
    """The tenant check runs after the X-JM-Min-Index wait, against the object as the
    peer then has it: tenant a asks for the next Livy batch number with an index a few
    entries ahead; tenant b's batch takes that number meanwhile; a gets the 404 of a batch
    that does not exist (before: 200 and b's batch, the check having run before the wait
    while the batch did not exist yet). An id no one has is a 404 too."""
    import asyncio
    async with running(str(tmp_path), 1, {"rest.auth.token": ROOT,
                                          "rest.write-timeout": "30 s"}) as c:
        t = await _tokens(c)
        batch = {"file": FIX + "jobs_fixture.py"}
        s, b = await ahttp("POST", c.url(0) + "/batches", batch, headers=t["b-sub"])
        assert s in (200, 201), b
        for ahead in (10, 40, 160):  # entries ahead: b's batch must commit within them
            s, _, h = await ahttp("GET", c.url(0) + "/healthz", with_headers=True)
            target = int(h["X-JM-Index"]) + ahead
            s, b = await ahttp("GET", c.url(0) + "/batches", headers=t["b-sub"])
            nxt = max(x["id"] for x in b["sessions"]) + 1
            peek = asyncio.ensure_future(ahttp(
                "GET", c.url(0) + f"/batches/{nxt}",
                headers={**t["a-read"], "X-JM-Min-Index": str(target)}, timeout=60))
            s, b, h = await ahttp("POST", c.url(0) + "/batches", batch, headers=t["b-sub"],
                                  with_headers=True)
            assert s in (200, 201) and b["id"] == nxt, b
            committed = int(h["X-JM-Index"])
            while not peek.done():  # more entries, until a's wait is over
                await ahttp("POST", c.url(0) + "/tokens", {"name": f"x{target}-{id(peek)}",
                                                           "role": "read"},
                            headers=bearer(ROOT))
                await asyncio.wait([peek], timeout=0.2)
            s, b = peek.result()
            assert s == 404 and b == {"errors": [f"batch {nxt} not found"]}, (s, b)
            if committed <= target:  # the batch existed when a's wait ended: the race
                break
        else:
            pytest.fail("b's batch never committed within the index a waited for")
        s, b = await ahttp("GET", c.url(0) + f"/batches/{nxt}", headers=t["b-sub"])
        assert s == 200 and b["id"] == nxt
        s, b = await ahttp("GET", c.url(0) + "/jobs/" + "0" * 32, headers=t["a-read"])
        assert s == 404 and b == {"errors": [f"job {'0' * 32} not found"]}, b


async def test_a_request_id_is_a_tenant_s_own(tmp_path):
    """X-Request-Id makes a retried submission one job, within a tenant: another tenant
    sending the same id gets a job of its own, never the first tenant's."""
    async with running(str(tmp_path), 1, {"rest.auth.token": ROOT}) as c:
        t = await _tokens(c)
        jobs = {}
        for who in ("a-sub", "a-sub", "b-sub"):
            s, b = await ahttp("POST", c.url(0) + "/jobs", {"entry": "jobs_fixture:quick",
                                                            "pyfiles": [FIX]},
                               headers={**t[who], "X-Request-Id": "nightly-2026-11-29"})
            assert s == 202, b
            jobs.setdefault(who, set()).add(b["jobid"])
        assert len(jobs["a-sub"]) == 1 and len(jobs["b-sub"]) == 1  # a's retry: one job
        (a_job,), (b_job,) = jobs["a-sub"], jobs["b-sub"]
        assert a_job != b_job
        s, b = await ahttp("GET", c.url(0) + f"/jobs/{b_job}", headers=t["b-sub"])
        assert s == 200 and b["tenant"] == "b", b
        # /nodes: how many jobs each peer runs, and the ids of the caller's tenant's only
        await _state(c, 0, a_job, t["a-sub"], "FINISHED")
        await _state(c, 0, b_job, t["b-sub"], "FINISHED")
        w = await _submit(c, 0, t["b-sub"])
        await _state(c, 0, w, t["b-sub"], "RUNNING")
        for who, mine in (("a-read", set()), ("b-sub", {w}), ("ops", {w})):
            s, b = await ahttp("GET", c.url(0) + "/nodes", headers=t[who])
            (node,) = b["nodes"]
            assert set(node["jobs"]) == mine and node["job-count"] == 1, (who, node)


async def test_a_tenant_restores_only_its_own_tenant_s_savepoints(tmp_path):
    """savepoint-path: a savepoint records its job's tenant; another tenant's credential
    naming it is a 403 (it would start from that tenant's state), its own one's goes."""
    import json
    async with running(str(tmp_path), 1, {"rest.auth.token": ROOT}) as c:
        t = await _tokens(c)
        sp = tmp_path / "ha" / "savepoints" / "sp-b"  # (state.savepoints.dir)
        (sp / "checkpoint").mkdir(parents=True)
        (sp / "_metadata").write_text(json.dumps({"job-id": "0" * 32, "tenant": "b",
                                                  "version": 1, "queries": {}}))
        spec = {**WAIT, **STREAMING, "savepoint-path": str(sp)}
        s, b = await ahttp("POST", c.url(0) + "/jobs", spec, headers=t["a-sub"])
        assert s == 403 and "not a savepoint of tenant a's jobs" in b["errors"][0], b
        s, b = await ahttp("POST", c.url(0) + "/jobs", spec, headers=t["b-sub"])
        assert s == 202, b
        # one made before savepoints recorded a tenant: the tenant of the job it names
        (sp / "_metadata").write_text(json.dumps({"job-id": b["jobid"], "version": 1,
                                                  "queries": {}}))
        s, b2 = await ahttp("POST", c.url(0) + "/jobs", spec, headers=t["a-sub"])
        assert s == 403, b2
        s, b2 = await ahttp("POST", c.url(0) + "/jobs", spec, headers=t["b-sub"])
        assert s == 202, b2
        for j in (b["jobid"], b2["jobid"]):
            await ahttp("PATCH", c.url(0) + f"/jobs/{j}", headers=t["b-sub"])


async def test_a_tenant_s_savepoints_go_and_come_only_where_it_was_granted(tmp_path):
    """A tenant's target-directory and savepoint-path: under state.savepoints.dir or a
    directory an admin granted it (links resolved), else 403, so that the peer writes and
    reads no other place of its host for it and restores no "savepoint" a tenant forged."""
    import json
    granted, elsewhere = tmp_path / "granted", tmp_path / "elsewhere"
    for d in (granted, elsewhere):
        d.mkdir()
    forged = elsewhere / "sp"
    (forged / "checkpoint").mkdir(parents=True)
    (forged / "_metadata").write_text(json.dumps({"job-id": "0" * 32, "tenant": "a",
                                                 "version": 1, "queries": {}}))
    (granted / "link").symlink_to(forged)
    async with running(str(tmp_path), 1, {"rest.auth.token": ROOT}) as c:
        t = await _tokens(c)
        for where in (forged, granted / "link"):
            s, b = await ahttp("POST", c.url(0) + "/jobs", {**WAIT, **STREAMING,
                                                            "savepoint-path": str(where)},
                               headers=t["a-sub"])
            assert s == 403 and "neither under state.savepoints.dir" in b["errors"][0], b
        s, b = await ahttp("POST", c.url(0) + "/jobs", {**WAIT, **STREAMING},
                           headers=t["a-sub"])
        assert s == 202, b
        jid = b["jobid"]
        await _state(c, 0, jid, t["a-sub"], "RUNNING")
        target = {"target-directory": f"file://{elsewhere}"}
        s, b = await ahttp("POST", c.url(0) + f"/jobs/{jid}/savepoints", target,
                           headers=t["a-sub"])
        assert s == 403 and f"{elsewhere} is neither under" in b["errors"][0], b
        s, b = await ahttp("POST", c.url(0) + f"/jobs/{jid}/stop", target, headers=t["a-sub"])
        assert s == 403, b
        rc, out, err = await jm("-a", c.url(0), "tenant", "set", "a", "--savepoint-dirs",
                                f"file://{granted}/", env={"JM_TOKEN": ROOT})
        assert rc == 0 and f"savepoints also in {granted}" in out, (out, err)
        s, b = await ahttp("POST", c.url(0) + f"/jobs/{jid}/savepoints",
                           {"target-directory": str(granted)}, headers=t["a-sub"])
        assert s == 202, b
        sp = await wait_savepoint_as(c, jid, b["request-id"], t["a-sub"])
        assert sp["operation"]["location"].startswith(f"{granted}/"), sp
        s, b = await ahttp("POST", c.url(0) + "/jobs", {
            **WAIT, **STREAMING, "savepoint-path": sp["operation"]["location"]},
            headers=t["a-sub"])
        assert s == 202, b  # its own savepoint, where it was granted
        restored = b["jobid"]
        # an admin of no tenant names any place; tenant b was granted nothing
        s, b = await ahttp("POST", c.url(0) + f"/jobs/{jid}/savepoints", target,
                           headers=t["ops"])
        assert s == 202, b
        s, body = await ahttp("GET", c.url(0) + "/tenants", headers=t["a-read"])
        assert body["tenants"][0]["savepoint-dirs"] == [str(granted)], body
        for j in (jid, restored):
            await ahttp("PATCH", c.url(0) + f"/jobs/{j}", headers=t["a-sub"])


async def test_a_proxy_user_is_bound_to_the_tenants_granted_it(tmp_path):
    """jobmanager.executor.proxy-users says which users the peers may switch to; a
    tenant's work may run only as those its record grants it (PUT /tenants
    "proxy-users", jm tenant set --proxy-users): none by default."""
    async with running(str(tmp_path), 1, {"rest.auth.token": ROOT,
                                          "jobmanager.executor.proxy-users": "nobody,daemon"}
                       ) as c:
        t = await _tokens(c)
        job = {**WAIT, "proxy-user": "nobody"}
        s, b = await ahttp("POST", c.url(0) + "/jobs", job, headers=t["a-sub"])
        assert s == 403 and "tenant a's jobs may not run as 'nobody'" in b["errors"][0], b
        s, b = await ahttp("POST", c.url(0) + "/sessions", {"kind": "pyspark",
                                                            "proxyUser": "nobody"},
                           headers=t["a-sub"])
        assert s == 403 and b["errors"][0].startswith("proxyUser: tenant a's sessions"), b
        rc, out, err = await jm("-a", c.url(0), "tenant", "set", "a", "--proxy-users",
                                "nobody", env={"JM_TOKEN": ROOT})
        assert rc == 0 and "proxy users nobody" in out, (out, err)
        s, b = await ahttp("POST", c.url(0) + "/jobs", job, headers=t["a-sub"])
        assert s == 202, b
        await ahttp("PATCH", c.url(0) + f"/jobs/{b['jobid']}", headers=t["a-sub"])
        # b was granted nothing: nobody stays a's
        s, b = await ahttp("POST", c.url(0) + "/jobs", job, headers=t["b-sub"])
        assert s == 403 and "its proxy users: none" in b["errors"][0], b
        # an admin naming tenant b for the job: b's grant decides too
        s, b = await ahttp("POST", c.url(0) + "/jobs", {**job, "tenant": "b"},
                           headers=t["ops"])
        assert s == 403, b
        s, b = await ahttp("GET", c.url(0) + "/tenants", headers=t["ops"])
        rows = {r["name"]: r for r in b["tenants"]}
        assert rows["a"]["proxy-users"] == ["nobody"], rows
        s, b = await ahttp("PUT", c.url(0) + "/tenants/a", {"proxy-users": ["root"]},
                           headers=t["ops"])
        assert s == 400 and "not root" in b["errors"][0], b


async def test_the_audit_log_can_be_neither_skipped_nor_flushed(tmp_path):
    """X-JM-Forwarded skips the audit entry only with the peer credential (the peer that
    passed the request on wrote it); requests without credentials are counted per source,
    so hundreds of them do not push the creation of an admin token out of the log; a
    path is kept to 256 characters."""
    import asyncio
    from jm.policy.members.security import peer_credential
    secret = "audit-test-secret"
    async with running(str(tmp_path), 1, {"rest.auth.token": ROOT,
                                          "cluster.secret": secret}) as c:
        s, b = await ahttp("POST", c.url(0) + "/tokens", {"name": "ops", "role": "admin"},
                           headers=bearer(ROOT))
        assert s == 201, b
        ops = bearer(b["token"])
        forged = {**ops, "X-JM-Forwarded": "1"}  # a client's own: proves nothing
        s, b = await ahttp("POST", c.url(0) + "/tokens", {"name": "sneaky", "role": "read"},
                           headers=forged)
        assert s == 201, b
        peer = {**ops, "X-JM-Forwarded": peer_credential(secret)}
        s, b = await ahttp("POST", c.url(0) + "/tokens", {"name": "passed-on", "role": "read"},
                           headers=peer)
        assert s == 201, b
        long_path = "/jobs/" + "j" * 600 + "/stop"
        s, b = await ahttp("POST", c.url(0) + long_path, {}, headers=ops)
        assert s == 404, b

        async def knock(n):
            for _ in range(n):
                s, _ = await ahttp("POST", c.url(0) + "/tokens", {"name": "x", "role": "admin"},
                                   headers={"Authorization": "Bearer wrong"})
                assert s == 401
        await asyncio.gather(*(knock(100) for _ in range(4)))
        s, b = await ahttp("GET", c.url(0) + "/audit?limit=10000&local=1", headers=ops)
        assert s == 200, b
        entries = b["entries"]
        made = [e.get("ids", {}) for e in entries if e.get("path") == "/tokens"
                and e.get("status") == 201]
        assert len(made) == 2, entries  # ops and sneaky; passed-on was audited by its sender
        sneaky = next(e for e in entries if e.get("path") == "/tokens"
                      and e.get("status") == 201 and e.get("forwarded"))
        assert sneaky["forwarded"] == "unproven" and sneaky["who"] == "ops"
        refused = [e for e in entries if e.get("status") == 401]
        assert [e["unauthenticated"] for e in refused] == [1], refused  # the rest counted
        assert refused[0]["remote"] == "127.0.0.1"
        cut = [e for e in entries if e.get("path", "").startswith("/jobs/jjj")]
        assert len(cut) == 1 and len(cut[0]["path"]) == 256, cut
        assert all(len(v) <= 256 for v in cut[0]["ids"].values())


async def test_audit_entries_are_shipped_to_syslog(tmp_path):
    """rest.audit.syslog: each entry also goes to a syslog receiver (here a UDP socket of
    the test's), facility auth, tag jobmanager-audit."""
    import json
    import socket
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    try:
        async with running(str(tmp_path), 1, {
                "rest.auth.token": ROOT,
                "rest.audit.syslog": f"udp://127.0.0.1:{sock.getsockname()[1]}"}) as c:
            s, b = await ahttp("POST", c.url(0) + "/tokens", {"name": "ops", "role": "admin"},
                               headers=bearer(ROOT))
            assert s == 201, b
            seen = []

            async def shipped():
                while True:
                    try:
                        seen.append(sock.recv(65536).decode())
                    except BlockingIOError:
                        break
                return next((m for m in seen if '"path":"/tokens"' in m), None)
            msg = await apoll(shipped, 30, what="the audit entry at the syslog receiver")
            # <PRI>: facility auth (4) * 8 + severity info (6) = 38
            assert msg.startswith("<38>jobmanager-audit: "), msg
            entry = json.loads(msg.split("jobmanager-audit: ", 1)[1].split("\x00")[0])
            assert entry["status"] == 201 and entry["method"] == "POST", entry
    finally:
        sock.close()


async def _secret(c, name, tenant="a"):
    s, b = await ahttp("POST", c.url(0) + "/tokens", {"name": name, "role": "submit",
                                                      "tenant": tenant}, headers=bearer(ROOT))
    assert s == 201, b
    return b["token"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run jobs as another user")
async def test_a_job_runs_as_its_proxy_user_only_where_the_policy_allows_it(tmp_path):
    from tests.integration.test_job_isolation import _open_up
    _open_up(tmp_path)
    nobody = pwd.getpwnam("nobody").pw_uid
    async with running(str(tmp_path), 1, {"jobmanager.executor.proxy-users": "nobody",
                                          "jobmanager.executor.preload": "none"}) as c:
        s, b = await ahttp("POST", c.url(0) + "/jobs", {
            "entry": "isolation_jobs:whoami", "pyfiles": [FIX], "proxy-user": "nobody",
            "restart-strategy": {"type": "none"}})
        assert s == 202, b
        job = await _state(c, 0, b["jobid"], {}, "FINISHED")
        assert job["result"]["uid"] == nobody, job
        s, b = await ahttp("POST", c.url(0) + "/jobs", {**WAIT, "proxy-user": "daemon"})
        assert s == 403 and "jobmanager.executor.proxy-users" in b["errors"][0], b
        s, b = await ahttp("POST", c.url(0) + "/batches", {"file": FIX + "jobs_fixture.py",
                                                           "proxyUser": "daemon"})
        assert s == 403 and b["errors"][0].startswith("proxyUser:"), b
        rc, out, err = await jm("-a", c.url(0), "run", FIX + "jobs_fixture.py",
                                "--proxy-user", "root")
        assert rc != 0 and "proxy" in err and len(err.splitlines()) == 1, (out, err)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a tenant's work as its user")
async def test_a_tenant_s_jobs_run_as_its_os_user_and_never_as_the_peer_s(tmp_path):
    from tests.integration.test_job_isolation import _open_up
    _open_up(tmp_path)
    nobody = pwd.getpwnam("nobody").pw_uid
    async with running(str(tmp_path), 2, {"rest.auth.token": ROOT,
                                          "jobmanager.executor.preload": "none"}) as c:
        t = await _tokens(c)
        rc, out, err = await jm("-a", c.url(1), "tenant", "set", "a", "--os-user", "nobody",
                                env={"JM_TOKEN": ROOT})
        assert rc == 0 and "runs as nobody" in out, (out, err)
        whoami = {"entry": "isolation_jobs:whoami", "pyfiles": [FIX],
                  "restart-strategy": {"type": "none"}}
        jobs = {}
        for who in ("a-sub", "b-sub"):
            s, b = await ahttp("POST", c.url(0) + "/jobs", whoami, headers=t[who])
            assert s == 202, b
            jobs[who] = b["jobid"]
        a = await _state(c, 0, jobs["a-sub"], t["a-sub"], "FINISHED")
        assert a["result"]["uid"] == nobody, a
        b = await _state(c, 0, jobs["b-sub"], t["b-sub"], "FINISHED")
        assert b["result"]["uid"] == os.geteuid(), b  # another tenant: as before
        rc, out, err = await jm("-a", c.url(0), "tenant", "list", env={"JM_TOKEN": ROOT})
        assert rc == 0 and any(line.split("\t")[0] == "a" and line.endswith("\tnobody")
                               for line in out.splitlines()), out
        # a user this host does not have: the attempt fails naming it, nothing runs as root
        s, body = await ahttp("PUT", c.url(0) + "/tenants/a", {"os-user": "jm-no-such-user"},
                              headers=bearer(ROOT))
        assert s == 200 and body["os-user"] == "jm-no-such-user", body
        s, body = await ahttp("POST", c.url(1) + "/jobs", whoami, headers=t["a-sub"])
        assert s == 202, body
        failed = await _state(c, 0, body["jobid"], t["a-sub"], "FAILED")
        s, ex = await ahttp("GET", c.url(0) + f"/jobs/{failed['jid']}/exceptions",
                            headers=t["a-sub"])
        assert "UserNotFound: the OS user 'jm-no-such-user'" in ex["root-exception"], ex
        # every peer's heartbeat names the tenant whose user its host lacks (placement
        # keeps such jobs on peers that have it; here none has, so it ran to fail above)
        await apoll(lambda: _missing_users(c, ["a"]), 30, 0.2, what="peers naming a's user missing")
        rc, out, err = await jm("-a", c.url(0), "cluster", env={"JM_TOKEN": ROOT})
        assert rc == 0 and "no OS user on" in out and "tenant(s) a:" in out, (out, err)
        # bad input: clear errors, nothing changed
        for body in ({"os-user": "root"}, {"os-user": "Not A User"}, {"os-user": 7}):
            s, b = await ahttp("PUT", c.url(0) + "/tenants/a", body, headers=bearer(ROOT))
            assert s == 400 and b["errors"], (body, s, b)
        s, b = await ahttp("PUT", c.url(0) + "/tenants/a", {"os-user": ""},
                           headers=bearer(ROOT))
        assert s == 200 and b["os-user"] is None, b
        await apoll(lambda: _missing_users(c, []), 30, 0.2, what="no peer lacking a user")


async def _missing_users(c, want) -> bool:
    s, b = await ahttp("GET", c.url(1) + "/nodes", headers=bearer(ROOT))
    assert s == 200, b
    return all(n["missing-os-users"] == want for n in b["nodes"])


async def test_os_user_is_refused_by_a_peer_not_running_as_root(tmp_path, monkeypatch):
    import jm.cluster.api.tenancy as tenancy
    async with running(str(tmp_path), 1, {"rest.auth.token": ROOT}) as c:
        monkeypatch.setattr(tenancy.os, "geteuid", lambda: 1000)
        s, b = await ahttp("PUT", c.url(0) + "/tenants/a", {"os-user": "nobody"},
                           headers=bearer(ROOT))
        assert s == 409 and "not root" in b["errors"][0], b
        s, b = await ahttp("GET", c.url(0) + "/tenants", headers=bearer(ROOT))
        assert s == 200 and b["tenants"] == [], b  # nothing kept


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a tenant's work as its user")
async def test_a_tenant_s_checkpoints_and_savepoints_are_closed_to_another_tenant_s_user(
        tmp_path):
    """Tenant a's streaming job (as nobody) keeps its checkpoint, resumes from its
    stop's savepoint (restored by the peer, as root: given back to nobody whole), and
    tenant b's job (as daemon) can read neither."""
    from tests.integration.test_job_isolation import _open_up
    from tests.integration.test_savepoints_moves import batches
    _open_up(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    os.chmod(out, 0o777)
    async with running(str(tmp_path), 2, {"rest.auth.token": ROOT,
                                          "jobmanager.executor.preload": "none"}) as c:
        t = await _tokens(c)
        for tenant, user in (("a", "nobody"), ("b", "daemon")):
            s, b = await ahttp("PUT", c.url(0) + f"/tenants/{tenant}", {"os-user": user},
                               headers=bearer(ROOT))
            assert s == 200, b
        ticker = {"entry": "isolation_jobs:private_ticker", "pyfiles": [FIX],
                  "job-type": "streaming", "args": {"output": str(out)}}
        jid = await _submit_spec(c, t["a-sub"], ticker)
        await _state(c, 0, jid, t["a-sub"], "RUNNING")
        await apoll(lambda: len(os.listdir(out)) >= 3, 60, what="3 batches")
        s, b = await ahttp("POST", c.url(1) + f"/jobs/{jid}/stop", {}, headers=t["a-sub"])
        assert s == 202, b
        sp = await wait_savepoint_as(c, jid, b["request-id"], t["a-sub"])
        location = sp["operation"]["location"]
        stopped = await _state(c, 0, jid, t["a-sub"], "FINISHED")
        checkpoint = os.path.join(str(tmp_path / "ha"), jid, "checkpoints")
        assert os.stat(checkpoint).st_uid == pwd.getpwnam("nobody").pw_uid
        assert os.stat(checkpoint).st_mode & 0o777 == 0o700
        assert os.stat(location).st_mode & 0o777 == 0o700
        # resumed from the savepoint (the peer copies it in as root): it writes on
        upto = max(batches(out))
        jid2 = await _submit_spec(c, t["a-sub"], {**ticker, "savepoint-path": location})
        await _state(c, 0, jid2, t["a-sub"], "RUNNING")
        await apoll(lambda: max(batches(out)) >= upto + 3, 60, what="batches after resume")
        assert stopped["result"]["next"] == upto + 1
        s, b = await ahttp("PATCH", c.url(0) + f"/jobs/{jid2}?mode=cancel",
                           headers=t["a-sub"])
        assert s == 202, b
        # tenant b's code reads neither a's checkpoint nor its savepoint
        offsets = os.path.join(checkpoint, "ticks", "offsets", "0")
        meta = os.path.join(location, "_metadata")
        assert os.path.exists(offsets) and os.path.exists(meta)
        peek = {"entry": "isolation_jobs:peer_files", "pyfiles": [FIX],
                "args": {"paths": [offsets, meta]}, "restart-strategy": {"type": "none"}}
        jid3 = await _submit_spec(c, t["b-sub"], peek)
        done = await _state(c, 0, jid3, t["b-sub"], "FINISHED")
        assert done["result"] == {offsets: "PermissionError", meta: "PermissionError"}, done


async def _submit_spec(c, headers, spec) -> str:
    s, b = await ahttp("POST", c.url(0) + "/jobs", spec, headers=headers)
    assert s == 202, b
    return b["jobid"]


async def wait_savepoint_as(c, jid, rid, headers):
    async def check():
        s, b = await ahttp("GET", c.url(0) + f"/jobs/{jid}/savepoints/{rid}", headers=headers)
        assert s == 200, b
        return b if b["status"]["id"] == "COMPLETED" else None
    return await apoll(check, 60, what=f"savepoint {rid}")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make cgroups")
async def test_a_tenant_s_job_processes_run_within_its_memory_and_cpu(tmp_path):
    """`jm tenant set --memory --cpu` bounds the tenant's job processes (v1 or v2: the
    job's own cgroup), removed when the job ends; another tenant's job is not bounded."""
    from jm.runtime.cgroups import layout
    if layout() is None:
        pytest.skip("no cgroup v2 mount and no v1 memory and cpu hierarchies")
    async with running(str(tmp_path), 1, {"rest.auth.token": ROOT,
                                          "jobmanager.executor.preload": "none"}) as c:
        t = await _tokens(c)
        rc, out, err = await jm("-a", c.url(0), "tenant", "set", "a", "--memory", "300 mb",
                                "--cpu", "50", env={"JM_TOKEN": ROOT})
        assert rc == 0, (out, err)
        probe = {"entry": "isolation_jobs:my_cgroup", "pyfiles": [FIX],
                 "restart-strategy": {"type": "none"}}
        a = await _state(c, 0, await _submit_spec(c, t["a-sub"], probe), t["a-sub"],
                         "FINISHED")
        assert a["result"]["memory"] == 300 << 20, a["result"]
        assert a["result"]["cpu"] in ("50", str(50 * 1024 // 100)), a["result"]
        mine = [p for p in a["result"]["paths"] if "jm-jobs/" in p]
        assert mine, a["result"]
        # gone once the job ended (the zygote removes it)
        await apoll(lambda: not any(os.path.exists(p) for p in mine), 30,
                    what="the job's cgroup removed")
        b = await _state(c, 0, await _submit_spec(c, t["b-sub"], probe), t["b-sub"],
                         "FINISHED")
        assert not any("jm-jobs/" in p for p in b["result"]["paths"]), b["result"]
