"""The first hour (bin/quickstart.sh, jm/local/quickstart.py): what it needs is checked
before anything is installed or started, and a peer whose Spark cannot start is reported
with the reason from its log instead of a wait that ends in a timeout."""
import asyncio
import os
import subprocess

from jm.config import read_masters
from jm.local import quickstart
from tests.conftest import running
from tests.helpers import ROOT


def test_quickstart_stops_at_once_without_java_and_says_what_to_install(tmp_path):
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "no-java")}
    r = subprocess.run(["bash", os.path.join(ROOT, "bin", "quickstart.sh")], env=env,
                       capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stdout == "" and "Traceback" not in r.stderr, (r.stdout, r.stderr)
    assert "Java 17 or later is needed" in r.stderr and "JAVA_HOME" in r.stderr
    assert "openjdk-17" in r.stderr, r.stderr


def test_quickstart_stops_at_once_with_an_old_java(tmp_path):
    java = tmp_path / "old" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text('#!/bin/sh\necho \'openjdk version "1.8.0_392"\' >&2\n')
    java.chmod(0o755)
    env = {**os.environ, "JAVA_HOME": str(tmp_path / "old")}
    r = subprocess.run(["bash", os.path.join(ROOT, "bin", "quickstart.sh")], env=env,
                       capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert r.returncode == 1 and "found 1.8.0_392" in r.stderr, (r.stdout, r.stderr)


async def test_a_peer_whose_spark_cannot_start_is_reported_with_its_reason(tmp_path,
                                                                          monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))  # (its engine's JVM: none)
    settings = {"spark.connect.embedded": True, "spark.master": "local[1]",
                "spark.connect.endpoint.enabled": False}
    async with running(str(tmp_path), 1, settings) as c:
        masters = read_masters(os.path.join(c.conf_dir, "masters"))
        said: list = []
        try:
            await asyncio.to_thread(quickstart.wait_ready, masters,
                                    str(tmp_path / "log"), 120,
                                    say=lambda line, **kw: said.append(line))
        except quickstart.SparkCannotStart as exc:
            why = str(exc)
        else:
            raise AssertionError("Spark started without Java")
    assert "cannot start" in why and "spark-connect.log" in why, why
    assert "no-java/bin/java" in why, why  # (spark-class's own words)
