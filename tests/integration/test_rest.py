"""REST API through real peers (in-process): happy paths and every kind of bad input."""
import os

import pytest

from tests.helpers import ahttp, apoll, asubmit_to, multipart

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"


async def _wait_state(c, jid, states, peer=0, timeout=30):
    async def check():
        s, b = await ahttp("GET", c.url(peer) + f"/jobs/{jid}")
        return b if s == 200 and b["state"] in states else None
    return await apoll(check, timeout, what=f"job {jid} in {states}")


async def test_overview_nodes_and_health(cluster3):
    c = cluster3
    for i in range(3):
        s, b = await ahttp("GET", c.url(i) + "/healthz")
        assert s == 200 and b["ok"] is True
    s, ov = await ahttp("GET", c.url(1) + "/overview")
    assert s == 200
    assert ov["peers"] == 3 and ov["peers-alive"] == 3
    assert ov["slots-total"] == 24 and ov["slots-available"] == 24
    assert ov["leader"] in {p.node for p in c.peers}
    s, nodes = await ahttp("GET", c.url(2) + "/nodes")
    assert {n["id"] for n in nodes["nodes"]} == {p.node for p in c.peers}
    assert sum(n["leader"] for n in nodes["nodes"]) == 1
    assert all(n["state"] == "ALIVE" and n["pid"] == os.getpid() for n in nodes["nodes"])


async def test_read_your_write_on_every_peer(cluster3):
    c = cluster3
    for i in range(3):
        jid = await asubmit_to(c, {"entry": "jobs_fixture:quick", "pyfiles": [FIX]}, peer=i)
        s, b = await ahttp("GET", c.url(i) + f"/jobs/{jid}")  # same peer, right away
        assert s == 200 and b["jid"] == jid
        s, lst = await ahttp("GET", c.url(i) + "/jobs")
        assert jid in {j["id"] for j in lst["jobs"]}


async def test_jobs_spread_over_peers_and_finish(cluster3):
    c = cluster3
    ids = [await asubmit_to(c, {"entry": "jobs_fixture:sleepy", "pyfiles": [FIX],
                                "args": {"seconds": 1}}, peer=i % 3) for i in range(9)]
    nodes = set()
    for jid in ids:
        job = await _wait_state(c, jid, {"FINISHED"})
        assert job["result"] == "slept"
        nodes.add(job["node"])
    assert len(nodes) >= 2, nodes
    s, ov = await ahttp("GET", c.url(0) + "/jobs/overview")
    rows = {r["jid"]: r for r in ov["jobs"]}
    assert all(rows[j]["state"] == "FINISHED" and rows[j]["duration"] >= 1000 for j in ids)

    # pages of /jobs: newest first, filtered on the peer; a page size out of range is a 400
    s, page = await ahttp("GET", c.url(1) + "/jobs?limit=4&state=finished")
    assert s == 200 and page["total"] == 9 and page["next-offset"] == 4
    assert [r["id"] for r in page["jobs"]] == ids[::-1][:4]
    s, rest = await ahttp("GET", c.url(2) + "/jobs?limit=4&offset=8&state=FINISHED")
    assert [r["id"] for r in rest["jobs"]] == ids[:1] and rest["next-offset"] is None
    s, page = await ahttp("GET", c.url(0) + f"/jobs?name={ids[3][:12]}")
    assert [r["id"] for r in page["jobs"]] == [ids[3]]
    s, page = await ahttp("GET", c.url(0) + "/jobs?state=RUNNING")
    assert page["jobs"] == [] and page["total"] == 0
    for bad in ("limit=0", "limit=1001", "offset=-2", "state=ASLEEP", "since=x"):
        s, b = await ahttp("GET", c.url(0) + f"/jobs?{bad}")
        assert s == 400 and b["errors"] and bad.split("=")[0] in b["errors"][0], (bad, b)
    s, b = await ahttp("GET", c.url(0) + "/nodes?state=RUNNING")
    assert s == 400 and "jobs only" in b["errors"][0]
    s, nodes = await ahttp("GET", c.url(0) + "/nodes?limit=2")
    assert len(nodes["nodes"]) == 2 and nodes["total"] == 3 and nodes["next-offset"] == 2
    # Flink's overview pages only on ask (its tools read it whole)
    s, ov = await ahttp("GET", c.url(2) + "/jobs/overview?limit=2&offset=1")
    assert [r["jid"] for r in ov["jobs"]] == ids[1:3]


async def test_fixed_jobid_conflict(cluster3):
    c = cluster3
    spec = {"entry": "jobs_fixture:quick", "pyfiles": [FIX], "jobid": "daily-report-1"}
    assert await asubmit_to(c, spec) == "daily-report-1"
    s, b = await ahttp("POST", c.url(2) + "/jobs", spec)
    assert s == 409 and "already exists" in b["errors"][0]


async def test_request_id_makes_submission_idempotent(cluster3):
    c = cluster3
    spec = {"entry": "jobs_fixture:quick", "pyfiles": [FIX]}
    s1, b1 = await ahttp("POST", c.url(0) + "/jobs", spec, headers={"X-Request-Id": "r-1"})
    s2, b2 = await ahttp("POST", c.url(1) + "/jobs", spec, headers={"X-Request-Id": "r-1"})
    assert s1 == s2 == 202 and b1["jobid"] == b2["jobid"]
    s, lst = await ahttp("GET", c.url(2) + "/jobs")
    assert [j["id"] for j in lst["jobs"]].count(b1["jobid"]) == 1


@pytest.mark.parametrize("body,fragment", [
    (b"{not json", "malformed JSON"),
    (b"", "empty"),
    (b"[1, 2]", "JSON object"),
    (b'{"entry": "m:f", "bogus": 1}', "unknown field"),
    (b'{"entry": "m:f", "sql": "SELECT 1"}', "exactly one"),
    (b'{"name": "neither"}', "exactly one"),
    (b'{"entry": "m:f", "jobid": "../../etc"}', "jobid"),
    (b'{"entry": "m:f", "jobid": ""}', "jobid"),
    (b'{"entry": "m:f", "slots": 0}', "slots"),
    (b'{"entry": "m:f", "slots": 1000}', "slots"),
    (b'{"entry": "not an entry"}', "entry"),
    (b'{"entry": "m:f", "pyfiles": ["relative/x.py"]}', "absolute"),
    (b'{"entry": "m:f", "restart-strategy": {"type": "sometimes"}}', "restart-strategy"),
    (b'{"entry": "m:f", "pyfiles": ["artifact:sha256:' + b"0" * 64 + b'"]}', "unknown artifact"),
])
async def test_bad_job_specs_get_400(cluster3, body, fragment):
    c = cluster3
    s, b = await ahttp("POST", c.url(0) + "/jobs", raw=body,
                       headers={"Content-Type": "application/json"})
    assert s == 400, b
    assert any(fragment in e for e in b["errors"]), b
    s, lst = await ahttp("GET", c.url(0) + "/jobs")
    assert lst["jobs"] == []  # nothing was created


async def test_unknown_ids_and_routes_get_404(cluster3):
    c = cluster3
    for path in ("/jobs/nope", "/jobs/nope/exceptions", "/jobs/nope/result", "/no/such/route"):
        s, b = await ahttp("GET", c.url(1) + path)
        assert s == 404 and b["errors"], (path, b)
    s, b = await ahttp("PATCH", c.url(1) + "/jobs/nope?mode=cancel")
    assert s == 404 and ("not found" in b["errors"][0] or "unknown job" in b["errors"][0]), b
    s, b = await ahttp("DELETE", c.url(1) + "/jobs")
    assert s == 405 and b["errors"]


async def test_oversized_body_gets_413(tmp_path):
    from tests.conftest import InProcessCluster
    c = InProcessCluster(str(tmp_path), 1, {"rest.max-body-size": "1 kb"})
    try:
        await c.start()
        big = {"entry": "m:f", "args": {"blob": "x" * 5000}}
        s, b = await ahttp("POST", c.url(0) + "/jobs", big)
        assert s == 413 and "too large" in b["errors"][0]
        payload, ctype = multipart("big.py", b"#" * 5000)
        s, b = await ahttp("POST", c.url(0) + "/artifacts", raw=payload,
                           headers={"Content-Type": ctype})
        assert s == 413 and b["errors"]
        s, lst = await ahttp("GET", c.url(0) + "/jobs")
        assert lst["jobs"] == []
    finally:
        await c.stop()


async def test_cancel_running_job(cluster3):
    c = cluster3
    jid = await asubmit_to(c, {"entry": "jobs_fixture:sleepy", "pyfiles": [FIX],
                               "args": {"seconds": 120}})
    await _wait_state(c, jid, {"RUNNING"})
    s, _ = await ahttp("PATCH", c.url(2) + f"/jobs/{jid}?mode=cancel")
    assert s == 202
    job = await _wait_state(c, jid, {"CANCELED"}, peer=1)
    assert job["attempts"][-1]["end-reason"] == "cancelled"
    s, b = await ahttp("PATCH", c.url(0) + f"/jobs/{jid}?mode=cancel")
    assert s == 409
    s, b = await ahttp("PATCH", c.url(0) + f"/jobs/{jid}?mode=explode")
    assert s == 400


async def test_cancel_honours_stop_requested(cluster3):
    c = cluster3
    jid = await asubmit_to(c, {"entry": "jobs_fixture:wait_for_stop", "pyfiles": [FIX]})
    await _wait_state(c, jid, {"RUNNING"})
    s, _ = await ahttp("PATCH", c.url(0) + f"/jobs/{jid}?mode=cancel")
    assert s == 202
    await _wait_state(c, jid, {"CANCELED"})


async def test_user_code_failures_end_failed_and_peer_keeps_serving(cluster3):
    c = cluster3
    cases = {
        "jobs_fixture:boom": "RuntimeError: boom from user code",
        "jobs_fixture:exits": "SystemExit: 3",
        "jobs_fixture:segfault": "signal SIGSEGV",
        "no_such_module_xyz:main": "ModuleNotFoundError",
        "jobs_fixture:no_such_function": "no callable",
    }
    ids = {}
    for entry in cases:
        ids[entry] = await asubmit_to(c, {"entry": entry, "pyfiles": [FIX],
                                          "restart-strategy": {"type": "none"}})
    for entry, expected in cases.items():
        await _wait_state(c, ids[entry], {"FAILED"})
        s, ex = await ahttp("GET", c.url(1) + f"/jobs/{ids[entry]}/exceptions")
        assert s == 200
        assert expected in ex["root-exception"], (entry, ex)
        s, res = await ahttp("GET", c.url(1) + f"/jobs/{ids[entry]}/result")
        assert res["state"] == "FAILED"
    s, ex = await ahttp("GET", c.url(1) + f"/jobs/{ids['jobs_fixture:boom']}/exceptions")
    assert "Traceback" in ex["all-exceptions"][0]["stacktrace"]
    for i in range(3):
        s, b = await ahttp("GET", c.url(i) + "/healthz")
        assert s == 200
    jid = await asubmit_to(c, {"entry": "jobs_fixture:quick", "pyfiles": [FIX]})
    await _wait_state(c, jid, {"FINISHED"})


async def test_restart_strategy_restarts_then_finishes(cluster3, tmp_path):
    c = cluster3
    jid = await asubmit_to(c, {"entry": "jobs_fixture:flaky", "pyfiles": [FIX],
                               "args": {"dir": str(tmp_path)},
                               "restart-strategy": {"type": "fixed-delay", "attempts": 2,
                                                    "delay": "100 ms"}})
    job = await _wait_state(c, jid, {"FINISHED", "FAILED"})
    assert job["state"] == "FINISHED" and job["result"] == "second run ok"
    assert job["restarts"] == 1
    s, ex = await ahttp("GET", c.url(0) + f"/jobs/{jid}/exceptions")
    assert ex["all-exceptions"][0]["exception"] == "ValueError: first run fails"


async def test_restart_attempts_exhausted_fails(cluster3):
    c = cluster3
    jid = await asubmit_to(c, {"entry": "jobs_fixture:boom", "pyfiles": [FIX],
                               "restart-strategy": {"type": "fixed-delay", "attempts": 2,
                                                    "delay": "50 ms"}})
    job = await _wait_state(c, jid, {"FAILED"})
    assert job["restarts"] == 2
    s, ex = await ahttp("GET", c.url(0) + f"/jobs/{jid}/exceptions")
    assert len(ex["all-exceptions"]) == 3 and ex["all-exceptions"][0]["final"] is True


async def test_artifact_upload_is_content_addressed_and_runs_everywhere(cluster3, tmp_path):
    c = cluster3
    code = b"def main(ctx):\n    return {'hello': ctx.args.get('who'), 'node': ctx.node}\n"
    payload, ctype = multipart("../../evil_name.py", code)
    s, art = await ahttp("POST", c.url(0) + "/artifacts", raw=payload,
                         headers={"Content-Type": ctype})
    assert s == 201, art
    import hashlib
    assert art["id"] == "sha256:" + hashlib.sha256(code).hexdigest()
    assert art["name"] == "evil_name.py"
    # stored under its hash inside the blob store, never at the given path
    data_dir = c.peers[0].ground.blobs.dir
    assert os.path.exists(os.path.join(data_dir, art["id"][7:], "evil_name.py"))
    assert not os.path.exists(os.path.join(os.path.dirname(os.path.dirname(data_dir)),
                                           "evil_name.py"))
    async def listed_on_peer2():  # read-your-writes holds on peer 0; peer 2 may lag a bit
        s, lst = await ahttp("GET", c.url(2) + "/artifacts")
        return art["id"] in {a["id"] for a in lst["artifacts"]}
    await apoll(listed_on_peer2, 10, what="the artifact replicated to peer 2")
    ids = [await asubmit_to(c, {"entry": "evil_name:main", "pyfiles": [art["pyfile"]],
                                "args": {"who": "world"}}, peer=i % 3) for i in range(6)]
    nodes = set()
    for jid in ids:
        job = await _wait_state(c, jid, {"FINISHED", "FAILED"})
        assert job["state"] == "FINISHED", job
        assert job["result"]["hello"] == "world"
        nodes.add(job["result"]["node"])
    assert len(nodes) >= 2  # other peers fetched the artifact on demand


@pytest.mark.parametrize("name", ["..", "dir/", "..."])
async def test_artifact_bad_names_rejected(cluster3, name):
    """A file of any name is an artifact (spark-submit ships jars, files, archives), but
    one whose name names no file is refused."""
    c = cluster3
    payload, ctype = multipart(name, b"print(1)\n")
    s, b = await ahttp("POST", c.url(0) + "/artifacts", raw=payload,
                       headers={"Content-Type": ctype})
    assert s == 400 and b["errors"]
    s, b = await ahttp("POST", c.url(0) + "/artifacts", raw=b"plain",
                       headers={"Content-Type": "text/plain"})
    assert s == 400


async def test_sql_job_without_spark_fails_clearly(cluster3):
    c = cluster3
    jid = await asubmit_to(c, {"sql": "SELECT 1", "restart-strategy": {"type": "none"}})
    await _wait_state(c, jid, {"FAILED"})
    s, ex = await ahttp("GET", c.url(0) + f"/jobs/{jid}/exceptions")
    assert "no Spark is configured" in ex["root-exception"]


async def test_jobs_wait_in_created_when_no_slot(tmp_path):
    from tests.conftest import InProcessCluster
    c = InProcessCluster(str(tmp_path), 1, {"jobmanager.slots": 1})
    try:
        await c.start()
        a = await asubmit_to(c, {"entry": "jobs_fixture:sleepy", "pyfiles": [FIX],
                                 "args": {"seconds": 120}})
        await _wait_state(c, a, {"RUNNING"})
        b = await asubmit_to(c, {"entry": "jobs_fixture:quick", "pyfiles": [FIX]})
        s, job = await ahttp("GET", c.url(0) + f"/jobs/{b}")
        assert job["state"] == "CREATED" and job["node"] is None
        s, ov = await ahttp("GET", c.url(0) + "/overview")
        assert ov["slots-available"] == 0 and ov["jobs-waiting"] == 1
        await ahttp("PATCH", c.url(0) + f"/jobs/{a}?mode=cancel")
        await _wait_state(c, b, {"FINISHED"})
    finally:
        await c.stop()


async def test_result_the_state_cannot_hold_fails_the_job_and_reporting_goes_on(cluster3):
    c = cluster3
    bad = await asubmit_to(c, {"entry": "jobs_fixture:huge_result", "pyfiles": [FIX]})
    job = await _wait_state(c, bad, {"FAILED", "FINISHED"})
    assert job["state"] == "FAILED"
    s, ex = await ahttp("GET", c.url(0) + f"/jobs/{bad}/exceptions")
    assert "could not be stored" in ex["root-exception"]
    ok = await asubmit_to(c, {"entry": "jobs_fixture:quick", "pyfiles": [FIX]})
    await _wait_state(c, ok, {"FINISHED"})  # the peers' reporters still work
    s, b = await ahttp("POST", c.url(1) + "/jobs", raw=b'{"entry": "m:f", "args": {"n": 1180591620717411303424}}',
                       headers={"Content-Type": "application/json"})
    assert s == 400 and b["errors"]


async def test_a_session_s_bad_dependencies_are_refused_each_named(cluster3):
    """A SQL gateway or Livy session's files and requirements are checked at its opening:
    a 400 naming each bad one, and no session opened."""
    c = cluster3
    s, b = await ahttp("POST", c.url(0) + "/sessions", {
        "kind": "pyspark", "jars": ["lib/a.jar"], "pyFiles": ["/m.zip#m"],
        "conf": {"spark.jm.requirements": "pyspark==4.0", "spark.jars.packages": "a:b:1"}})
    assert s == 400, b
    text = " ".join(b["errors"])
    for word in ("'lib/a.jar' is not an artifact", "spark.submit.pyFiles",
                 "spark.jm.requirements[0]: pyspark", "spark.jars.packages"):
        assert word in text, b
    s, b = await ahttp("POST", c.url(0) + "/v1/sessions", {
        "properties": {"spark.files": "https://example.org/x.csv"}})
    assert s == 400 and "local files only" in " ".join(b["errors"]), b
    s, b = await ahttp("GET", c.url(0) + "/sessions")
    assert s == 200 and b["total"] == 0, b
