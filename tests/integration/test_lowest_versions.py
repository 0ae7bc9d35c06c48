"""The lowest versions pyproject.toml allows of the runtime dependencies (tests/lowest.py;
bin/test.sh installs them into .cache/lowest): the tests that use each of them pass with
those too (aiohttp's server and client, msgpack's codec, YAML, Prometheus's exposition,
Raft's encryption, the SQL classifier, JWTs, requirement parsing, completion, orjson)."""
import os
import subprocess
import sys

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.slow  # a pytest of its own that starts clusters: not beside others

LOWEST = os.path.join(ROOT, ".cache", "lowest")
TESTS = ["tests/unit/test_sqlparse.py", "tests/unit/test_wire.py", "tests/unit/test_fastjson.py",
         "tests/unit/test_commands.py", "tests/unit/test_config.py",
         "tests/unit/test_jwtauth.py", "tests/unit/test_envs_policy.py",
         "tests/unit/test_metrics_registry.py", "tests/unit/test_packaging.py",
         "tests/integration/test_raft_password.py", "tests/integration/test_jobs_api.py",
         "tests/integration/test_metrics_exposition.py",
         "tests/integration/test_completion.py::test_job_ids_come_from_the_cluster"]


def test_the_lowest_allowed_versions_pass_the_tests_that_use_them(tmp_path):
    from tests.lowest import STAMP, floors
    try:
        with open(os.path.join(LOWEST, STAMP)) as f:
            installed = f.read().split()
    except OSError:
        pytest.skip(f"no {LOWEST} (bin/test.sh installs the lowest versions there)")
    assert installed == floors(), "bin/test.sh installs the floors pyproject.toml has now"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([LOWEST, ROOT]))
    probe = ("import aiohttp, msgpack, yaml, sqlglot, jwt, packaging, cryptography; "
             "print(aiohttp.__version__, sqlglot.__version__, jwt.__version__)")
    r = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                       text=True, timeout=60)
    versions = r.stdout.split()
    assert r.returncode == 0 and versions[0].startswith("3.14") and \
        versions[1].startswith("30.30"), (r.stdout, r.stderr)  # (they are the ones used)
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        f"--basetemp={tmp_path / 'run'}", *TESTS],
                       env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:]
