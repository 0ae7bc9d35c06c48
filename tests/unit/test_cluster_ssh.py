"""bin/cluster.sh's ssh command line for remote peers, with a stand-in `ssh` that records
its arguments: env.ssh.opts split as a shell would, JM_CONF_DIR/JM_HOME sent as absolute
paths and every word quoted for the remote shell. (tests/e2e/test_hosts.py runs it for
real against sshd on network namespaces.)"""
import os
import shlex
import subprocess
import sys

from jm.local import launcher
from tests.helpers import ROOT

FAKE_SSH = """#!/bin/sh
for a in "$@"; do printf '%s\\0' "$a"; done >> "$SSH_LOG"
printf '\\n' >> "$SSH_LOG"
"""


def _conf(tmp_path, masters: list[str], config: str = "") -> str:
    conf = tmp_path / "my conf"
    conf.mkdir()
    (conf / "masters").write_text("\n".join(masters) + "\n")
    (conf / "config.yaml").write_text(config)
    return str(conf)


def _run_cluster(tmp_path, conf: str, *args: str, cwd: str | None = None,
                 home: str | None = None) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    bindir = tmp_path / "fakebin"
    bindir.mkdir(exist_ok=True)
    (bindir / "ssh").write_text(FAKE_SSH)
    (bindir / "ssh").chmod(0o755)
    log = tmp_path / "ssh.log"
    env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", SSH_LOG=str(log),
               JM_CONF_DIR=conf, JM_PYTHON=sys.executable)
    env.pop("JM_HOME", None)
    if home is not None:
        env["JM_HOME"] = home
    r = subprocess.run([os.path.join(ROOT, "bin", "cluster.sh"), *args], env=env, cwd=cwd,
                       capture_output=True, text=True, timeout=60)
    calls = [line.split("\0")[:-1] for line in log.read_text().splitlines()] \
        if log.exists() else []
    return r, calls


def test_remote_peers_get_quoted_absolute_paths_overrides_and_ssh_opts(tmp_path):
    conf = _conf(tmp_path, ["10.1.2.3:8081:6123", "10.1.2.4:8081:6123"],
                 "env.ssh.opts: -p 2222 -o 'ProxyCommand=nc -x proxy %h %p'\n")
    r, calls = _run_cluster(tmp_path, "my conf", "start", "-D", "rest.write-timeout=5 s",
                            "-Dcluster.secret=it's", cwd=str(tmp_path), home="jm home")
    assert r.returncode == 0, r.stderr
    assert len(calls) == 2
    for call, host in zip(calls, ("10.1.2.3", "10.1.2.4")):
        assert call[:6] == ["-n", "-p", "2222", "-o", "ProxyCommand=nc -x proxy %h %p", host]
        assert call[6] == "--"
        # what the remote POSIX shell sees
        assert shlex.split(call[7]) == [
            "cd", ROOT, "&&", f"JM_CONF_DIR={conf}", f"JM_HOME={tmp_path}/jm home",
            "bin/jobmanager.sh", "start", f"{host}:8081:6123",
            "-D", "rest.write-timeout=5 s", "-D", "cluster.secret=it's"]


def test_stop_takes_overrides_and_no_home_is_sent_unless_set(tmp_path):
    conf = _conf(tmp_path, ["10.1.2.3:8081:6123"])
    r, calls = _run_cluster(tmp_path, conf, "stop", "-D", "env.ssh.opts=-F /x/ssh_config")
    assert r.returncode == 0, r.stderr
    assert calls[0][:4] == ["-n", "-F", "/x/ssh_config", "10.1.2.3"]
    words = shlex.split(calls[0][5])
    assert words[3] == f"JM_CONF_DIR={conf}"
    # the whole cluster stops: no peer drains into peers about to stop too
    assert words[4:] == ["bin/jobmanager.sh", "stop", "10.1.2.3:8081:6123",
                         "-D", "env.ssh.opts=-F /x/ssh_config", "--no-drain"]


def test_bad_ssh_opts_or_arguments_stop_before_any_ssh(tmp_path):
    conf = _conf(tmp_path, ["10.1.2.3:8081:6123"], "env.ssh.opts: -o \"unclosed\n")
    r, calls = _run_cluster(tmp_path, conf, "start")
    assert r.returncode == 2 and not calls
    assert "env.ssh.opts" in r.stderr
    r, calls = _run_cluster(tmp_path, conf, "start", "oops")
    assert r.returncode == 2 and not calls and "unexpected argument" in r.stderr


def test_launcher_ssh_opts_prints_one_word_per_line(tmp_path, capsys):
    conf = _conf(tmp_path, ["10.1.2.3:8081:6123"], "env.ssh.opts: '-i \"/k/my key\" -v'\n")
    assert launcher.main(["ssh-opts", "--conf-dir", conf]) == 0
    assert capsys.readouterr().out.splitlines() == ["-i", "/k/my key", "-v"]
    assert launcher.main(["ssh-opts", "--conf-dir", conf, "-D", "env.ssh.opts="]) == 0
    assert capsys.readouterr().out == ""
