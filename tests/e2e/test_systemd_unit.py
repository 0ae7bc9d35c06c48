"""deploy/systemd/jobmanager@.service run the way systemd runs it, where no systemd runs
(containers such as CI's; tests/unit/test_deploy.py checks the file itself, and has
`systemd-analyze verify` check it where systemd runs):
its ExecStart with the instance name for %i, its Environment (the install and config
paths mapped onto this checkout), a job running under it; then `systemctl stop` as
KillMode=mixed does it: SIGTERM to the main process, which must end cleanly within
TimeoutStopSec with nothing of the unit left for systemd to SIGKILL. A unit's cgroup holds
every process it started, also those in sessions of their own (the zygote): here an
environment variable only the unit's processes inherit marks them. Before the stop, the
signals an operator sends a live peer: USR1 (its Raft state) and USR2 (thread stacks)."""
from __future__ import annotations

import configparser
import os
import shlex
import signal
import subprocess
import sys
import uuid

import pytest

from tests.e2e.procs import _running
from tests.helpers import ROOT, http, make_conf, poll

UNIT = os.path.join(ROOT, "deploy", "systemd", "jobmanager@.service")
FIX = os.path.join(ROOT, "tests", "integration") + "/"
INSTALL, CONF = "/opt/jm", "/etc/jm"  # where the unit expects the project and its config


def _unit() -> configparser.SectionProxy:
    unit = configparser.ConfigParser(interpolation=None, strict=False)
    unit.optionxform = str
    # Environment= is a repeated key: keep every line (configparser keeps the last)
    text = open(UNIT).read()
    unit.read_string(text)
    svc = unit["Service"]
    svc["Environment"] = "\n".join(
        line.split("=", 1)[1] for line in text.splitlines() if line.startswith("Environment="))
    return svc


def _mapped(value: str, conf_dir: str) -> str:
    return (value.replace(f"{INSTALL}/.venv/bin/python", sys.executable)
            .replace(INSTALL, ROOT).replace(CONF, conf_dir))


def _unit_processes(marker: str) -> list[int]:
    """The live processes whose environment holds `marker` (the unit's cgroup)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/environ", "rb") as f:
                    if marker.encode() not in f.read().split(b"\0"):
                        continue
            except OSError:
                continue
            if _running(int(name)):
                out.append(int(name))
    return out


@pytest.mark.slow
def test_the_unit_starts_a_peer_and_stops_it_cleanly(tmp_path):
    svc = _unit()
    conf_dir, lines = make_conf(str(tmp_path), 1)
    instance = lines[0]
    env = dict(os.environ)
    env.pop("JM_CONF_DIR", None)
    marker = f"JM_TEST_UNIT={uuid.uuid4().hex}"
    env["JM_TEST_UNIT"] = marker.split("=", 1)[1]
    # (the peer's children see only an allow-list of its environment: name the marker)
    env["JM_CONF_JOBMANAGER_EXECUTOR_ENV_PASS"] = "JM_TEST_UNIT"
    for assignment in svc["Environment"].splitlines():
        key, value = assignment.split("=", 1)
        env[key] = _mapped(value, conf_dir)
    assert env["JM_CONF_DIR"] == conf_dir and env["JM_PYTHON"] == sys.executable
    argv = [_mapped(a, conf_dir).replace("%i", instance) for a in shlex.split(svc["ExecStart"])]
    assert os.access(argv[0], os.X_OK), argv
    log = open(tmp_path / "unit.log", "w")
    main = subprocess.Popen(argv, env=env, cwd="/", stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    url = "http://127.0.0.1:" + instance.split(":")[1]
    try:
        poll(lambda: main.poll() is None and http("GET", url + "/readyz")[0] == 200, 60,
             what="the unit's peer ready")
        s, b = http("POST", url + "/jobs", {"entry": "jobs_fixture:sleepy", "pyfiles": [FIX],
                                            "args": {"seconds": 600}})
        assert s == 202, b
        jid = b["jobid"]
        poll(lambda: http("GET", url + f"/jobs/{jid}")[1].get("state") == "RUNNING", 60,
             what="a job running under the unit")
        assert len(_unit_processes(marker)) >= 3  # the peer, its zygote, the job
        # what an operator asks a live peer (docs/guide/running-peers.md): its Raft state
        # (USR1) and every thread's stack (USR2) into its log, and it runs on
        main.send_signal(signal.SIGUSR1)
        main.send_signal(signal.SIGUSR2)
        # (the log is opened for writing, not appending, as systemd `StandardOutput=file:`
        # opens it: the stack dump must not land over the logged Raft state)
        try:
            poll(lambda: "Raft leader term" in open(tmp_path / "unit.log").read()
                 and "most recent call first" in open(tmp_path / "unit.log").read(), 20,
                 what="the Raft state and the thread stacks in the peer's log")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{open(tmp_path / 'unit.log').read()[-4000:]}") from None
        assert " up: REST http://" in open(tmp_path / "unit.log").read()  # (not written over)
        assert http("GET", url + "/healthz")[0] == 200
        main.send_signal(signal.SIGTERM)  # KillMode=mixed: SIGTERM to the main process only
        rc = main.wait(float(svc["TimeoutStopSec"]))
        assert rc == 0, open(tmp_path / "unit.log").read()[-3000:]
        # the stop went through the drain's decision (jm/cluster/members/stopdrain.py): a peer
        # alone has nowhere to drain to, and says so
        assert "stops without draining: " in open(tmp_path / "unit.log").read()
        # what systemd would SIGKILL now: nothing may be left of the unit
        poll(lambda: not _unit_processes(marker), 10, what="every process of the unit gone")
    finally:
        for pid in [main.pid, *_unit_processes(marker)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        main.wait(10)
        log.close()
    assert not _running(main.pid)
