"""`jm run` against real in-process peers (scripts that need no Spark): the upload of the
application and its --py-files, jm's options before and after the application's
arguments, `--` for the application's own clashing options, --wait streaming the
driver's output and exiting with the job's outcome, usage errors in one line."""
import json

from tests.helpers import ahttp
from tests.integration.test_cli import assert_one_error_line, jm

APP = """
import json, sys
import run_helper
print("argv", json.dumps(sys.argv))
print("helper", run_helper.NAME)
if "--fail" in sys.argv:
    sys.exit("asked to fail")
"""


def _files(tmp_path):
    app = tmp_path / "app_main.py"
    app.write_text(APP)
    helper = tmp_path / "run_helper.py"
    helper.write_text("NAME = 'from the helper'\n")
    return str(app), str(helper)


async def test_run_wait_streams_the_output_and_passes_arguments(cluster3, tmp_path):
    app, helper = _files(tmp_path)
    rc, out, err = await jm("-a", cluster3.url(1), "run", "--mode", "connect", app, "x y",
                            "--py-files", helper, "-v", "--name", "cli-run", "--wait", "--",
                            "--name", "theirs")
    assert rc == 0, (out, err)
    assert 'argv ["app_main.py", "x y", "-v", "--name", "theirs"]' in out, out
    assert "helper from the helper" in out
    assert "submitted; its driver's output follows" in err
    jid = err.split("[jm] job ", 1)[1].split()[0]
    s, job = await ahttp("GET", cluster3.url(2) + f"/jobs/{jid}")
    assert s == 200 and job["name"] == "cli-run" and job["state"] == "FINISHED"
    assert job["spec"]["script"].startswith("artifact:sha256:")
    assert job["spec"]["pyfiles"][0].startswith("artifact:sha256:")


async def test_run_failure_exits_non_zero_with_the_root_exception(cluster3, tmp_path):
    app, helper = _files(tmp_path)
    rc, out, err = await jm("-a", cluster3.url(0), "run", app, "--fail", "--mode", "connect",
                            "--py-files", helper, "--wait")
    assert "helper from the helper" in out
    assert_one_error_line(rc, err.split("\n", 1)[1], 1, "ended FAILED",
                          "SystemExit: asked to fail", "jm exceptions")


async def test_run_without_wait_prints_the_job_id(cluster3, tmp_path):
    app, helper = _files(tmp_path)
    rc, out, err = await jm("-a", cluster3.url(0), "run", app, "--mode", "connect",
                            "--py-files", helper, "--json")
    assert rc == 0, err
    jid = json.loads(out)["jobid"]
    s, job = await ahttp("GET", cluster3.url(0) + f"/jobs/{jid}")
    assert s == 200


async def test_run_usage_errors(cluster3, tmp_path):
    app, _ = _files(tmp_path)
    rc, out, err = await jm("-a", cluster3.url(0), "run", str(tmp_path / "nope.py"))
    assert_one_error_line(rc, err, 2, "nope.py: no such file")
    rc, out, err = await jm("-a", cluster3.url(0), "run", str(tmp_path / "app.txt"))
    assert_one_error_line(rc, err, 2, "must be a .py file or a .zip")
    rc, out, err = await jm("-a", cluster3.url(0), "run", app, "--mode", "yarn")
    assert_one_error_line(rc, err, 2, "invalid choice: 'yarn'")
    rc, out, err = await jm("-a", cluster3.url(0), "run", app, "--conf", "nokey")
    assert_one_error_line(rc, err, 2, "--conf 'nokey': expected KEY=VALUE")
    rc, out, err = await jm("-a", cluster3.url(0), "run", app, "--conf", "spark.master=x")
    assert_one_error_line(rc, err, 1, "spark.master is set by the cluster")
    rc, out, err = await jm("run", app, "--address", cluster3.url(0))
    assert_one_error_line(rc, err, 2, "--address must stand before APP")
