"""The light client, jm-client (bin/build-client.sh: hatchling from clients/jm-client): a
wheel with the jm CLI, its completion and the Python client, installed into a fresh
virtualenv without any dependency (so no pyspark), drives a real cluster."""
import asyncio
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import running
from tests.helpers import ROOT

pytestmark = pytest.mark.slow  # makes a virtualenv


def _copy_installed(name: str, venv) -> None:
    """Install distribution `name` into `venv` by copying this environment's installed
    files (its RECORD): a pure-Python package, without the network."""
    import shutil
    from importlib import metadata
    dist = metadata.distribution(name)
    site = next((venv / "lib").glob("python3*/site-packages"))
    for f in dist.files or ():
        src = dist.locate_file(f)
        if str(f).startswith("..") or "__pycache__" in str(f) or not os.path.isfile(src):
            continue
        dst = site / str(f)
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)


def _run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, timeout=120, **kw)


async def test_the_client_wheel_installs_alone_and_drives_a_cluster(tmp_path):
    r = await asyncio.to_thread(_run, [os.path.join(ROOT, "bin", "build-client.sh"),
                                       str(tmp_path / "dist")])
    assert r.returncode == 0, r.stderr
    wheel = r.stdout.strip()
    venv = tmp_path / "venv"
    r = await asyncio.to_thread(_run, [sys.executable, "-m", "venv", str(venv)])
    assert r.returncode == 0, r.stderr
    py, jm = str(venv / "bin" / "python"), str(venv / "bin" / "jm")
    r = await asyncio.to_thread(_run, [py, "-m", "pip", "install", "-q", "--no-index",
                                       "--no-deps", wheel])
    assert r.returncode == 0, r.stderr
    r = await asyncio.to_thread(_run, [py, "-m", "pip", "check"])
    assert r.returncode == 1 and "argcomplete" in r.stdout, r.stdout  # its one dependency
    _copy_installed("argcomplete", venv)  # (offline: this environment's, as installed)
    r = await asyncio.to_thread(_run, [py, "-m", "pip", "check"])
    assert r.returncode == 0, r.stdout
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "JM_CONF_DIR")}
    r = await asyncio.to_thread(_run, [py, "-c", "import pyspark"], env=clean, cwd=str(tmp_path))
    assert r.returncode != 0  # nothing heavy came with it
    r = await asyncio.to_thread(_run, [py, "-c", "import aiohttp"], env=clean, cwd=str(tmp_path))
    assert r.returncode != 0
    r = await asyncio.to_thread(_run, [jm, "completion", "bash"], env=clean, cwd=str(tmp_path))
    assert r.returncode == 0 and "complete " in r.stdout and " jm" in r.stdout, r.stderr
    r = await asyncio.to_thread(_run, ["bash", "-n"], input=r.stdout)
    assert r.returncode == 0, r.stderr
    async with running(str(tmp_path / "c"), 2) as c:
        env = dict(clean, JM_ADDRESS=",".join(c.urls))
        r = await asyncio.to_thread(_run, [jm, "--json", "submit", "--sql", "SELECT 1"],
                                    env=env, cwd=str(tmp_path))
        assert r.returncode == 0, r.stderr
        r = await asyncio.to_thread(_run, [jm, "--json", "list"], env=env, cwd=str(tmp_path))
        assert r.returncode == 0, r.stderr
        assert len(json.loads(r.stdout)["jobs"]) == 1
        jid = json.loads(r.stdout)["jobs"][0]["jid"]
        code = ("from jm.client import dbapi, Jobs; print(dbapi.__name__); "
                f"print(Jobs({c.urls[0]!r}).status({jid!r})['jid'] == {jid!r})")
        r = await asyncio.to_thread(_run, [py, "-c", code], env=clean, cwd=str(tmp_path))
        assert r.returncode == 0 and r.stdout.split() == ["jm.client.dbapi", "True"], \
            (r.stdout, r.stderr)
