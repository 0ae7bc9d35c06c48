"""Failures that fail fast, through real peers and job processes (issue 32): the default
restart strategy by job type, failures no restart can pass (never restarted, whatever the
strategy), no driver JVM for a script that does not compile, and tracebacks that show the
user's code only (error.json, the job's log, `jm submit --wait`, `jm run --wait`)."""
import os

from jm.policy.jobs.vocab import TERMINAL
from tests.conftest import running
from tests.helpers import ahttp, apoll, asubmit_to
from tests.integration.test_cli import jm

FIX = os.path.dirname(os.path.abspath(__file__)) + "/"
# restart-strategy.type unset, as shipped (and as a MiniCluster leaves it)
DEFAULTS = {"restart-strategy.type": None, "restart-strategy.fixed-delay.delay": "100 ms"}
FIXED = {"type": "fixed-delay", "attempts": 3, "delay": "100 ms"}


async def _ended(c, jid, timeout=90):
    async def check():
        s, b = await ahttp("GET", c.url(0) + f"/jobs/{jid}")
        return b if s == 200 and b["state"] in TERMINAL else None
    return await apoll(check, timeout, what=f"job {jid} ended")


async def _failures(c, jid):
    s, ex = await ahttp("GET", c.url(0) + f"/jobs/{jid}/exceptions")
    assert s == 200, ex
    return [e for e in ex["all-exceptions"] if e["failure"]]


def _script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(body)
    return str(path)


async def test_by_default_batch_and_script_jobs_fail_at_once_streaming_jobs_restart(tmp_path):
    raises = _script(tmp_path, "raises.py", "raise RuntimeError('from the script')\n")
    marker = tmp_path / "markers"
    marker.mkdir()
    async with running(str(tmp_path / "cluster"), 1, DEFAULTS) as c:
        batch = await asubmit_to(c, {"entry": "jobs_fixture:boom", "pyfiles": [FIX]})
        script = await asubmit_to(c, {"script": raises, "spark-mode": "connect"})
        stream = await asubmit_to(c, {"entry": "jobs_fixture:flaky", "pyfiles": [FIX],
                                      "args": {"dir": str(marker)}, "job-type": "streaming"})
        for jid, text in ((batch, "RuntimeError: boom from user code"),
                          (script, "RuntimeError: from the script")):
            job = await _ended(c, jid)
            assert job["state"] == "FAILED" and job["restarts"] == 0, job
            [failure] = await _failures(c, jid)
            assert failure["exception"] == text and failure["final"] is True
            assert failure["reason"] == "restart strategy is none", failure
        job = await _ended(c, stream)
        # a streaming job keeps fixed-delay: its first run failed, the second finished
        assert job["state"] == "FINISHED" and job["restarts"] == 1, job
        assert job["result"] == "second run ok"


async def test_failures_no_restart_can_pass_fail_at_once_even_with_fixed_delay(tmp_path):
    cases = {
        "syntax": ({"script": _script(tmp_path, "syntax_app.py", "def f(:\n    pass\n")},
                   "SyntaxError", "not restarted: the job's code does not compile"),
        "missing module": (
            {"script": _script(tmp_path, "nomod_app.py", "import os\nimport no_such_mod_xyz\n")},
            "ModuleNotFoundError: No module named 'no_such_mod_xyz'",
            "not restarted: an import in the job's code failed, before its Spark "
            "application started"),
        "usage": ({"script": _script(tmp_path, "usage_app.py", (
            "import argparse\np = argparse.ArgumentParser()\np.add_argument('input')\n"
            "p.parse_args()\n"))},
            "SystemExit: 2",
            "not restarted: it exited (code 2) before its Spark application started"),
        "entry module": ({"entry": "no_such_module_xyz:main"}, "ModuleNotFoundError",
                         "not restarted: an import in the job's code failed"),
        "entry function": ({"entry": "jobs_fixture:no_such_function", "pyfiles": [FIX]},
                           "no callable", "not restarted: the entry function is missing"),
    }
    async with running(str(tmp_path / "cluster"), 1, DEFAULTS) as c:
        ids = {name: await asubmit_to(c, dict(spec, **{"restart-strategy": FIXED,
                                                       "spark-mode": "connect"}))
               for name, (spec, _, _) in cases.items()}
        control = await asubmit_to(c, {"entry": "jobs_fixture:boom", "pyfiles": [FIX],
                                       "restart-strategy": FIXED})
        for name, (spec, text, reason) in cases.items():
            job = await _ended(c, ids[name])
            assert job["state"] == "FAILED" and job["restarts"] == 0, (name, job)
            [failure] = await _failures(c, ids[name])
            assert text in failure["exception"], (name, failure)
            assert failure["final"] is True and failure["reason"].startswith(reason), \
                (name, failure)
        # any other failure: the strategy decides, as before
        job = await _ended(c, control)
        assert job["state"] == "FAILED" and job["restarts"] == 3, job
        assert len(await _failures(c, control)) == 4


async def test_a_script_gone_before_its_job_runs_fails_at_once(tmp_path):
    """The script is there when the job is submitted, gone when a slot frees for it."""
    app = _script(tmp_path, "gone_app.py", "print('hello')\n")
    async with running(str(tmp_path / "cluster"), 1,
                       dict(DEFAULTS, **{"jobmanager.slots": 1})) as c:
        busy = await asubmit_to(c, {"entry": "jobs_fixture:sleepy", "pyfiles": [FIX],
                                    "args": {"seconds": 2}})
        jid = await asubmit_to(c, {"script": app, "spark-mode": "connect",
                                   "restart-strategy": FIXED})
        s, job = await ahttp("GET", c.url(0) + f"/jobs/{jid}")
        assert job["state"] == "CREATED", job  # waits for the one slot
        os.remove(app)
        assert (await _ended(c, busy))["state"] == "FINISHED"
        job = await _ended(c, jid)
        assert job["state"] == "FAILED" and job["restarts"] == 0, job
        [failure] = await _failures(c, jid)
        assert "gone_app.py does not exist" in failure["exception"], failure
        assert failure["reason"] == f"not restarted: {app} does not exist on this peer"


async def test_a_script_that_does_not_compile_starts_no_driver_jvm(tmp_path):
    """Classic mode: the script is compiled before the job's driver JVM starts. The
    driver here cannot start (its heap size is invalid): a job that runs a script says
    so, one whose script does not compile fails with its SyntaxError alone."""
    conf = {"spark-mode": "classic", "spark-conf": {"spark.driver.memory": "1x"},
            "restart-strategy": {"type": "none"}}
    good = _script(tmp_path, "fine_app.py", "print('hello')\n")
    bad = _script(tmp_path, "broken_app.py", "print('hello'\n")
    async with running(str(tmp_path / "cluster"), 1, DEFAULTS) as c:
        control = await asubmit_to(c, dict(conf, script=good))
        broken = await asubmit_to(c, dict(conf, script=bad))
        assert (await _ended(c, control))["state"] == "FAILED"
        [failure] = await _failures(c, control)
        assert "the Spark driver did not start" in failure["exception"], failure
        job = await _ended(c, broken)
        assert job["state"] == "FAILED", job
        [failure] = await _failures(c, broken)
        assert failure["exception"].startswith("SyntaxError: "), failure
        assert "did not start" not in failure["exception"]
        assert 'broken_app.py", line 1' in failure["stacktrace"], failure
        assert not (job["attempts"][0].get("spark-app-id")), job
        s, logs = await ahttp("GET", c.url(0) + f"/jobs/{broken}/logs")
        assert s == 200 and "SyntaxError" in logs["text"]
        assert "heap" not in logs["text"].lower() and "spark" not in logs["text"].lower(), \
            logs["text"]


HELPER = "def fail():\n    raise ValueError('deep in the user code')\n"
APP = "import trace_helper\n\n\ndef go():\n    trace_helper.fail()\n\n\ngo()\n"
ENTRY = ("import trace_helper\n\n\ndef main(ctx):\n    trace_helper.fail()\n")
OURS = ("jm/runtime", "jobrun", "usercode", "importlib", "runpy", "zygote")


def _only_user_frames(text: str, *expected: str) -> None:
    for fragment in expected:
        assert fragment in text, (fragment, text)
    for fragment in OURS:
        assert fragment not in text, (fragment, text)


async def test_tracebacks_show_the_users_frames_only(tmp_path):
    helper = _script(tmp_path, "trace_helper.py", HELPER)
    app = _script(tmp_path, "trace_app.py", APP)
    entry = _script(tmp_path, "trace_entry.py", ENTRY)
    async with running(str(tmp_path / "cluster"), 1, DEFAULTS) as c:
        # jm run --wait: the driver's output (the job's log) has the user's traceback
        rc, out, err = await jm("-a", c.url(0), "run", "--mode", "connect", app,
                                "--py-files", helper, "--wait")
        assert rc == 1, (out, err)
        _only_user_frames(out, 'trace_app.py", line 8, in <module>',
                          'trace_app.py", line 5, in go', 'trace_helper.py", line 2, in fail',
                          "ValueError: deep in the user code")
        # (the files by the names they were uploaded under, not the peer's copies' paths)
        assert 'File "trace_app.py", line 8' in out and "/blobs/" not in out, out
        assert 'File "trace_helper.py", line 2' in out, out
        jid = err.split("[jm] job ", 1)[1].split()[0]
        [failure] = await _failures(c, jid)
        _only_user_frames(failure["stacktrace"], 'trace_app.py", line 5, in go',
                          'trace_helper.py", line 2, in fail')
        assert "/blobs/" not in failure["stacktrace"], failure
        # jm submit --wait: the exception's line and the user's frames, nothing else
        rc, out, err = await jm("-a", c.url(0), "submit", entry, "--pyfile", helper,
                                "--wait")
        assert rc == 1, (out, err)
        lines = out.strip().splitlines()
        assert lines[1:3] == ["FAILED", "ValueError: deep in the user code"], out
        _only_user_frames("\n".join(lines[3:]), 'in main', "trace_helper.fail()",
                          'trace_helper.py", line 2, in fail')
        assert "Traceback" not in out and len(lines) == 7, out
        s, logs = await ahttp("GET", c.url(0) + f"/jobs/{lines[0]}/logs")
        _only_user_frames(logs["text"], "Traceback", 'trace_helper.py", line 2, in fail')
