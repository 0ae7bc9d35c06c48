"""The `jm` CLI against real in-process peers. The peers run in the test's event loop,
so the CLI always runs as a subprocess (blocking HTTP from the test would deadlock)."""
import asyncio
import http.server
import json
import os
import signal
import sys

import pytest

from tests.helpers import ROOT, ahttp, apoll, free_ports, http_server

FIX = os.path.dirname(os.path.abspath(__file__))
QUICK = ["--entry", "jobs_fixture:quick", "--pyfile", FIX + "/"]


async def jm(*args: str, env: dict | None = None, timeout: float = 90.0,
             stdin: bytes | None = None) -> tuple[int, str, str]:
    e = dict(os.environ)
    e.pop("JM_ADDRESS", None)
    e.update(env or {})
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jm.client.cli", *args, cwd=ROOT, env=e,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        out, err = await asyncio.wait_for(proc.communicate(stdin), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise AssertionError(f"jm {' '.join(args)} did not end within {timeout} s")
    return proc.returncode, out.decode(), err.decode()


def assert_one_error_line(rc: int, err: str, code: int, *fragments: str) -> None:
    assert rc == code, (rc, err)
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jm: "), err
    for f in fragments:
        assert f in lines[0], (f, err)


async def job_state(url: str, jid: str) -> str | None:
    s, b = await ahttp("GET", f"{url}/jobs/{jid}")
    return b["state"] if s == 200 else None


async def test_submit_upload_wait_prints_result(cluster3, tmp_path):
    c = cluster3
    job = tmp_path / "hello_job.py"
    job.write_text('def main(ctx):\n    return {"hello": ctx.args.get("who")}\n')
    rc, out, err = await jm("--address", c.url(0), "submit", str(job), "--arg", "who=world",
                            "--name", "hello", "--wait", "--timeout", "60")
    assert rc == 0, (out, err)
    lines = out.strip().splitlines()
    assert len(lines) == 3, out
    jid, state, result = lines
    assert state == "FINISHED"
    assert json.loads(result) == {"hello": "world"}

    # what the cluster got: an uploaded artifact and entry <stem>:main
    s, detail = await ahttp("GET", f"{c.url(2)}/jobs/{jid}")
    assert s == 200 and detail["name"] == "hello"
    assert detail["spec"]["entry"] == "hello_job:main"
    assert detail["spec"]["pyfiles"][0].startswith("artifact:sha256:")

    rc, out, err = await jm("--address", c.url(1), "result", jid)
    assert rc == 0 and json.loads(out) == {"hello": "world"}, (out, err)

    rc, out, err = await jm("--address", c.url(1), "artifacts")
    assert rc == 0 and "hello_job.py" in out and detail["spec"]["pyfiles"][0] in out, out

    # the same bytes under another file name: the cluster keeps one name per content
    # (the first), so the entry must name that module for the job to import on any peer
    again = tmp_path / "again_job.py"
    again.write_text(job.read_text())
    rc, out, err = await jm("--address", c.url(1), "submit", str(again), "--arg", "who=2",
                            "--wait")
    assert rc == 0 and json.loads(out.splitlines()[-1]) == {"hello": "2"}, (out, err)
    s, detail2 = await ahttp("GET", f"{c.url(0)}/jobs/{out.split()[0]}")
    assert detail2["spec"]["entry"] == "hello_job:main"

    # upload, then submit by artifact id, with a non-default function and JSON args
    job.write_text(job.read_text() + '\ndef other(ctx):\n    return ctx.args\n')
    rc, out, err = await jm("--address", c.url(2), "upload", str(job))
    assert rc == 0 and out.strip().startswith("artifact:sha256:"), (out, err)
    pyfile = out.strip()
    rc, out, err = await jm("--address", c.url(2), "submit", "--entry", "hello_job:other",
                            "--pyfile", pyfile, "--args-json", '{"n": 2}', "--arg", "k=v",
                            "--wait")
    assert rc == 0, (out, err)
    assert json.loads(out.strip().splitlines()[-1]) == {"n": 2, "k": "v"}

    # an artifact no job names can be deleted; one a job names cannot (one line, exit 1)
    spare = tmp_path / "spare.py"
    spare.write_text("x = 1\n")
    rc, out, err = await jm("--address", c.url(0), "upload", str(spare))
    spare_id = out.strip()
    rc, out, err = await jm("--address", c.url(1), "artifacts", "--delete", spare_id)
    assert rc == 0 and out.strip() == f"deleted {spare_id}", (out, err)
    rc, out, err = await jm("--address", c.url(2), "artifacts")
    assert rc == 0 and spare_id not in out and pyfile in out, out
    rc, out, err = await jm("--address", c.url(2), "artifacts", "--delete", pyfile)
    assert rc != 0 and "named by job" in err and len(err.strip().splitlines()) == 1, err


async def test_list_status_cluster(cluster3):
    c = cluster3
    rc, out, err = await jm("--address", c.url(1), "submit", *QUICK, "--name", "cli-quick",
                            "--arg", "x=1", "--wait")
    assert rc == 0, (out, err)
    jid = out.split()[0]

    rc, out, err = await jm("list", "--address", c.url(2))   # options after the command
    assert rc == 0, err
    row = next(line for line in out.splitlines() if jid in line)
    assert "cli-quick" in row and "FINISHED" in row
    assert out.splitlines()[0].split()[:3] == ["ID", "NAME", "STATE"]

    rc, out, err = await jm("--address", c.url(0), "--json", "list")
    assert rc == 0 and any(j["jid"] == jid for j in json.loads(out)["jobs"])

    # pages, newest first; filters applied by the peer
    rc, out2, err = await jm("--address", c.url(1), "submit", *QUICK, "--name", "cli-second",
                             "--wait")
    assert rc == 0, err
    rc, out, err = await jm("-a", c.url(0), "list", "--limit", "1")
    assert rc == 0 and "cli-second" in out and "cli-quick" not in out, out
    assert "older ones: jm list --offset 1 --limit 1" in out
    rc, out, err = await jm("-a", c.url(0), "list", "--limit", "1", "--all")
    assert rc == 0 and "cli-second" in out and "cli-quick" in out and "older" not in out
    rc, out, err = await jm("-a", c.url(0), "list", "--name", "SECOND", "--state", "finished")
    assert rc == 0 and "cli-second" in out and "cli-quick" not in out, out
    rc, out, err = await jm("-a", c.url(0), "list", "--state", "RUNNING")
    assert rc == 0 and out.strip() == "no jobs"
    rc, out, err = await jm("-a", c.url(0), "list", "--limit", "5000")
    assert rc != 0 and "limit must be between 1 and 1000" in err
    assert len(err.strip().splitlines()) == 1, err

    rc, out, err = await jm("--address", c.url(0), "status", jid)
    assert rc == 0, err
    assert jid in out and "FINISHED" in out and "cli-quick" in out
    assert "ATTEMPT" in out and "jobs_fixture:quick" in out
    assert '"x": "1"' in out          # the result echoes the args

    s, nodes = await ahttp("GET", c.url(0) + "/nodes")
    ids = [n["id"] for n in nodes["nodes"]]
    assert len(ids) == 3
    rc, out, err = await jm("--address", c.url(0), "cluster")
    assert rc == 0, err
    assert "3 (3 alive)" in out
    for node_id in ids:
        assert node_id in out
    assert sum(1 for line in out.splitlines() if "ALIVE" in line) == 3

    rc, out, err = await jm("--address", c.url(0), "cluster", "--json")
    assert rc == 0 and len(json.loads(out)["nodes"]) == 3


async def test_cancel_sleepy_job(cluster3):
    c = cluster3
    rc, out, err = await jm("--address", c.url(0), "submit", "--entry", "jobs_fixture:sleepy",
                            "--pyfile", FIX + "/", "--arg", "seconds=120")
    assert rc == 0, err
    jid = out.strip()
    await apoll(lambda: _is(job_state(c.url(0), jid), "RUNNING"), 30, what="sleepy running")

    rc, out, err = await jm("--address", c.url(1), "cancel", jid)
    assert rc == 0 and jid in out, (out, err)
    await apoll(lambda: _is(job_state(c.url(2), jid), "CANCELED"), 30, what="job canceled")

    # a second cancel is an API error (already ended), as one line
    rc, out, err = await jm("--address", c.url(1), "cancel", jid)
    assert_one_error_line(rc, err, 1, "CANCELED", "409")

    # cancel --wait, and submit --wait on a job that gets cancelled exits non-zero
    # (wait_for_stop honours the stop signal, so these cancels need no kill timeout)
    waiter = asyncio.create_task(jm("--address", c.url(2), "submit", "--entry",
                                    "jobs_fixture:wait_for_stop", "--pyfile", FIX + "/", "--wait"))
    jid2 = await apoll(lambda: _other_running(c.url(0), jid), 30, what="second job running")
    rc, out, err = await jm("--address", c.url(0), "cancel", jid2, "--wait", "--timeout", "60")
    assert rc == 0 and out.strip() == "CANCELED", (out, err)
    rc, out, err = await waiter
    assert out.strip().splitlines() == [jid2, "CANCELED"], out
    assert_one_error_line(rc, err, 1, "CANCELED")

    # Ctrl-C while waiting: exit 130, one line, and the job keeps running
    # as from a terminal: SIGINT raises KeyboardInterrupt even where the test runner was
    # started with SIGINT ignored (a background job of a non-interactive shell, inherited)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", "import runpy, signal, sys; "
        "signal.signal(signal.SIGINT, signal.default_int_handler); sys.argv[0] = 'jm'; "
        "runpy.run_module('jm.client.cli', run_name='__main__')",
        "--address", c.url(0), "submit", "--entry",
        "jobs_fixture:wait_for_stop", "--pyfile", FIX + "/", "--wait", cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    jid3 = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip()
    await apoll(lambda: _is(job_state(c.url(0), jid3), "RUNNING"), 30, what="third job")
    proc.send_signal(signal.SIGINT)
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert_one_error_line(proc.returncode, err.decode(), 130, "interrupted", jid3)
    assert await job_state(c.url(0), jid3) == "RUNNING"
    rc, out, err = await jm("--address", c.url(0), "cancel", jid3, "--wait")
    assert rc == 0, err


async def _is(coro, want):
    return (await coro) == want


async def _other_running(url, known):
    s, b = await ahttp("GET", url + "/jobs/overview")
    for j in b["jobs"]:
        if j["jid"] != known and j["state"] == "RUNNING":
            return j["jid"]
    return None


async def test_failed_job_and_api_errors(cluster3):
    c = cluster3
    rc, out, err = await jm("--address", c.url(0), "submit", "--entry", "jobs_fixture:boom",
                            "--pyfile", FIX + "/", "--wait")
    lines = out.strip().splitlines()
    assert lines[1] == "FAILED" and "boom from user code" in lines[2], out
    assert_one_error_line(rc, err, 1, "FAILED", "boom from user code")
    jid = lines[0]
    rc, out, err = await jm("--address", c.url(1), "exceptions", jid)
    assert rc == 0 and "RuntimeError: boom from user code" in out and "Traceback" in out
    rc, out, err = await jm("--address", c.url(1), "result", jid)
    assert_one_error_line(rc, err, 1, "FAILED")

    for cmd in ("status", "result", "exceptions", "cancel"):
        rc, out, err = await jm("--address", c.url(2), cmd, "no-such-job")
        assert_one_error_line(rc, err, 1, "no-such-job", "404")

    # the server's validation messages come through
    rc, out, err = await jm("--address", c.url(0), "submit", *QUICK,
                            "--restart-strategy", "sometimes")
    assert_one_error_line(rc, err, 1, "restart-strategy", "400")
    rc, out, err = await jm("--address", c.url(0), "submit", "--entry", "m:f",
                            "--pyfile", "artifact:sha256:" + "0" * 64)
    assert_one_error_line(rc, err, 1, "unknown artifact")
    rc, out, err = await jm("--address", c.url(0), "submit", *QUICK, "--jobid", "dup-1")
    assert rc == 0 and out.strip() == "dup-1"
    rc, out, err = await jm("--address", c.url(0), "submit", *QUICK, "--jobid", "dup-1")
    assert_one_error_line(rc, err, 1, "already exists", "409")


async def test_spec_file_and_env_address(cluster3, tmp_path):
    c = cluster3
    spec = {"name": "from-spec", "entry": "jobs_fixture:quick", "pyfiles": [FIX + "/"],
            "args": {"a": [1, 2]}}
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec))
    host_port = c.url(1).split("://", 1)[1]            # no scheme: host:port
    rc, out, err = await jm("submit", "--spec", str(path), "--wait",
                            env={"JM_ADDRESS": host_port})
    assert rc == 0, (out, err)
    jid, state, result = out.strip().splitlines()
    assert state == "FINISHED" and json.loads(result)["args"] == {"a": [1, 2]}
    s, detail = await ahttp("GET", f"{c.url(0)}/jobs/{jid}")
    assert detail["name"] == "from-spec"

    # the spec from stdin; --json prints the API's answer
    rc, out, err = await jm("submit", "--spec", "-", "--json", env={"JM_ADDRESS": host_port},
                            stdin=json.dumps(spec).encode())
    assert rc == 0 and "jobid" in json.loads(out), (out, err)

    # --address wins over JM_ADDRESS
    dead = f"127.0.0.1:{free_ports(1)[0]}"
    rc, out, err = await jm("--address", c.url(2), "list", env={"JM_ADDRESS": dead})
    assert rc == 0 and jid in out, err
    rc, out, err = await jm("list", "--timeout", "2", env={"JM_ADDRESS": dead})
    assert_one_error_line(rc, err, 3, "cannot reach", dead)


async def test_unreachable_and_usage_errors(tmp_path):
    dead = f"127.0.0.1:{free_ports(1)[0]}"
    for args in (["list"], ["cluster"], ["status", "x"], ["submit", *QUICK]):
        rc, out, err = await jm("--address", dead, "--timeout", "1", *args, timeout=30)
        assert_one_error_line(rc, err, 3, "cannot reach")
        assert out == ""

    zipped = tmp_path / "lib.zip"
    zipped.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    bad_name = tmp_path / "my-job.py"
    bad_name.write_text("def main(ctx): pass\n")
    usage = [
        [],                                            # no command
        ["frobnicate"],                                # unknown command
        ["status"],                                    # missing JOBID
        ["submit"],                                    # nothing to submit
        ["submit", *QUICK, "--slots", "many"],
        ["submit", *QUICK, "--arg", "novalue"],
        ["submit", *QUICK, "--args-json", "[1]"],
        ["submit", "--entry", "no_colon"],
        ["submit", str(zipped)],                       # a zip needs --entry module:function
        ["submit", str(bad_name)],                     # not an importable module name
        ["submit", str(tmp_path / "missing.py")],
        ["submit", "--sql", "SELECT 1", "--spec", "x.json"],
        ["upload", str(tmp_path / "notes.txt")],
        ["--address", "ftp://nowhere", "list"],
        ["--timeout", "-1", "list"],
    ]
    for args in usage:
        rc, out, err = await jm("--address", dead, *args) if args[:1] != ["--address"] \
            else await jm(*args)
        assert_one_error_line(rc, err, 2)
    rc, out, err = await jm("--help")
    assert rc == 0 and "submit" in out and err == ""


class _StubApi(http.server.BaseHTTPRequestHandler):
    """POST /jobs: drops the first connection, answers 503 once, then 202."""
    seen: list = []

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).seen.append(self.headers.get("X-Request-Id"))
        n = len(type(self).seen)
        if n == 1:
            self.close_connection = True
            self.connection.shutdown(2)
            return
        if n == 2:
            body, status = b'{"errors": ["no Raft leader at the moment"]}', 503
        else:
            body, status = b'{"jobid": "stub-job"}', 202
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Retry-After", "0")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def stub_api():
    _StubApi.seen = []
    with http_server(_StubApi) as port:
        yield f"127.0.0.1:{port}"


async def test_submit_retries_with_the_same_request_id(stub_api):
    rc, out, err = await jm("--address", stub_api, "submit", *QUICK, "--timeout", "20")
    assert rc == 0 and out.strip() == "stub-job", (out, err)
    ids = _StubApi.seen
    assert len(ids) == 3 and ids[0] and len(set(ids)) == 1, ids


async def test_savepoint_stop_resume_drain_rebalance(cluster3, tmp_path):
    """jm savepoint / stop / submit --from-savepoint / drain / rebalance, end to end."""
    c = cluster3
    out = tmp_path / "out"
    ticker = ["--entry", "jobs_fixture:ticker", "--pyfile", FIX + "/", "--arg",
              f"output={out}"]
    rc, jid, err = await jm("-a", c.url(0), "submit", *ticker, "--streaming")
    assert rc == 0, err
    jid = jid.strip()
    await apoll(lambda: job_state(c.url(0), jid), 30)
    await apoll(lambda: os.path.isdir(out) and len(os.listdir(out)) >= 2, 30, what="batches")
    rc, text, err = await jm("-a", c.url(1), "savepoint", jid, "--target", str(tmp_path / "sp"))
    assert rc == 0 and text.startswith("savepoint: " + str(tmp_path / "sp")), (text, err)
    rc, text, err = await jm("-a", c.url(2), "savepoint", jid, "--detached", "--json")
    rid = json.loads(text)["request-id"]
    rc, text, err = await jm("-a", c.url(2), "savepoint", jid, "--status", rid)
    assert rc == 0 and text.startswith("savepoint"), (text, err)
    # drain the peer that runs it: the job moves
    s, b = await ahttp("GET", f"{c.url(0)}/jobs/{jid}")
    owner = b["node"]
    rc, text, err = await jm("-a", c.url(0), "drain", owner, "--wait", "--wait-timeout", "60")
    assert rc == 0 and text.strip() == f"{owner}: DRAINED", (text, err)
    b = await apoll(lambda: _moved(c, jid), 30, what="the job running on another peer")
    assert b["node"] != owner and b["moves"] == 1
    rc, text, err = await jm("-a", c.url(0), "drain", owner, "--undo")
    assert rc == 0 and "ALIVE" in text, err
    rc, text, err = await jm("-a", c.url(0), "rebalance", "--json")
    assert rc == 0 and set(json.loads(text)) == {"moves", "refused"}, err
    # stop with a savepoint, then resume a new job from it
    rc, text, err = await jm("-a", c.url(1), "stop", jid)
    assert rc == 0 and text.startswith("stopped with savepoint: "), (text, err)
    location = text.split(": ", 1)[1].strip()
    assert (await job_state(c.url(1), jid)) == "FINISHED"  # where the stop was answered
    rc, jid2, err = await jm("-a", c.url(2), "submit", *ticker, "--from-savepoint", location)
    assert rc == 0, err
    s, b = await ahttp("GET", f"{c.url(2)}/jobs/{jid2.strip()}")  # read your write there
    assert b["spec"]["savepoint-path"] == location and b["job-type"] == "streaming"
    rc, text, err = await jm("-a", c.url(2), "cancel", jid2.strip(), "--wait")
    assert rc == 0, err
    # errors are one line
    rc, text, err = await jm("-a", c.url(0), "savepoint", "nope")
    assert_one_error_line(rc, err, 1, "nope")
    rc, text, err = await jm("-a", c.url(0), "stop", jid)
    assert_one_error_line(rc, err, 1, "already ended")
    rc, text, err = await jm("-a", c.url(0), "drain", "nope:1")
    assert_one_error_line(rc, err, 1, "unknown peer")
    rc, text, err = await jm("-a", c.url(0), "submit", *ticker, "--from-savepoint",
                             str(tmp_path / "nothing"))
    assert_one_error_line(rc, err, 1, "not a savepoint")


async def test_logs_follow_token_and_address_fallback(tmp_path):
    """jm logs -f follows a job into its next attempt until it ends; --token / $JM_TOKEN;
    several addresses: the next one is tried when a peer does not answer; submit --wait
    shows progress on stderr."""
    from tests.conftest import InProcessCluster
    c = InProcessCluster(str(tmp_path), 2, {"rest.auth.token": "tok",
                                            "restart-strategy.type": "fixed-delay",
                                            "restart-strategy.fixed-delay.attempts": 1,
                                            "restart-strategy.fixed-delay.delay": "100 ms"})
    try:
        await c.start()
        dead = f"http://127.0.0.1:{free_ports(1)[0]}"
        addr = f"{dead},{c.url(1)}"
        rc, out, err = await jm("-a", c.url(0), "list")
        assert_one_error_line(rc, err, 1, "401")
        rc, out, err = await jm("-a", addr, "--token", "tok", "submit", *QUICK, "--wait",
                                "--progress")
        assert rc == 0, err
        assert "FINISHED" in err and "s  " in err  # progress lines: elapsed, state, peer
        jid = out.split()[0]
        rc, out, err = await jm("-a", addr, "logs", jid, env={"JM_TOKEN": "tok"})
        assert rc == 0 and f"[jm] job {jid} attempt 1" in out, (out, err)
        # a job that fails once and runs again: -f prints both runs and ends with the job
        marker_dir = tmp_path / "flaky"
        marker_dir.mkdir()
        rc, jid2, err = await jm("-a", c.url(0), "--token", "tok", "submit", "--entry",
                                 "jobs_fixture:flaky", "--pyfile", FIX + "/", "--arg",
                                 f"dir={marker_dir}")
        assert rc == 0, err
        rc, out, err = await jm("-a", c.url(0), "--token", "tok", "logs", jid2.strip(), "-f",
                                timeout=60)
        assert rc == 0, err
        assert out.count(f"[jm] job {jid2.strip()} attempt 1") == 2  # both runs
        assert "ValueError: first run fails" in out
        rc, out, err = await jm("-a", c.url(0), "--token", "tok", "logs", jid2.strip(),
                                "--tail", "1")
        assert rc == 0 and len(out.strip().splitlines()) == 1
    finally:
        await c.stop()


async def _moved(c, jid):
    s, b = await ahttp("GET", f"{c.url(0)}/jobs/{jid}")
    return b if s == 200 and b["state"] == "RUNNING" and b["moves"] == 1 else None
