"""Test hosts reached over ssh: one network namespace per "host" (chaos.netns.TestNet), each
running Debian's sshd on its own address, port 22, so that bin/start-cluster.sh starts the
remote peers of conf/masters exactly as on real hosts.

Everything lives in a temporary directory: the client key, each sshd's host key, config,
pid file and log, the ssh client config (`ssh_config`) and known_hosts. Nothing under
/etc/ssh or ~/.ssh is read or written: the client runs with `-F <dir>/ssh_config` (give
`ssh_opts` as `env.ssh.opts`). sshd needs its privilege separation directory /run/sshd;
it is created (empty, as Debian's init script does) when missing.

The hosts share this machine's filesystem and PID namespace, so pid files and shared paths
work as on hosts with NFS. `stop()` (also `__exit__`, also after a failure) kills whatever
still runs inside the namespaces, stops every sshd by pid and deletes the namespaces.
Needs root, iproute2 and /usr/sbin/sshd. No pytest here: `python -m chaos` uses it too.
"""
from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
from typing import Optional

from chaos.netns import TestNet
from chaos.netns import available as netns_available
from chaos.peers import running, wait_gone
from jm.local.localcluster import wait_until

SSHD = "/usr/sbin/sshd"
PRIVSEP_DIR = "/run/sshd"


class HostsError(RuntimeError):
    pass


def available() -> Optional[str]:
    """None when test hosts can run here, else why not (for a skip message)."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, sshd)"
    for tool in (SSHD, shutil.which("ssh"), shutil.which("ssh-keygen")):
        if not tool or not os.access(tool, os.X_OK):
            return f"needs openssh ({tool or 'ssh/ssh-keygen'} not found)"
    if not netns_available():
        return "network namespaces unavailable (ip netns add failed)"
    return None


_running = running   # (chaos.peers: the one liveness check by PID)
_wait_gone = wait_gone


class Hosts:
    """n ssh-reachable hosts 10.<subnet>.0.2.. (namespaces <prefix>0..); the root namespace
    reaches them through the bridge address 10.<subnet>.0.1."""

    def __init__(self, n: int, prefix: str = "jmh", subnet: int = 214,
                 base: Optional[str] = None, startup_timeout: float = 30.0,
                 host_env: Optional[list[dict]] = None) -> None:
        self.net = TestNet(n, prefix=prefix, subnet=subnet)
        self.addresses = self.net.hosts
        self._own_dir = base is None
        self.dir = base or tempfile.mkdtemp(prefix="jm-hosts-")
        self.startup_timeout = startup_timeout
        self.key = os.path.join(self.dir, "id_ed25519")
        self.ssh_config = os.path.join(self.dir, "ssh_config")
        self.sshd: list[subprocess.Popen] = []
        # environment of every ssh session on host i (SetEnv / AcceptEnv), e.g. the
        # directory of a clock fault (chaos/clock.py): what runs there inherits it
        self.host_env = host_env or [{} for _ in self.addresses]

    @property
    def ssh_opts(self) -> str:
        """ssh options for bin/cluster.sh (the `env.ssh.opts` value)."""
        return f"-F {shlex.quote(self.ssh_config)}"

    def ssh(self, i: int, command: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
        """Run a shell command on host i over ssh (its output captured)."""
        return subprocess.run(["ssh", "-n", "-F", self.ssh_config, self.addresses[i], "--",
                               command], capture_output=True, text=True, timeout=timeout)

    def start(self) -> None:
        try:
            os.makedirs(self.dir, exist_ok=True)
            os.makedirs(PRIVSEP_DIR, mode=0o755, exist_ok=True)
            self._keygen(self.key)
            shutil.copyfile(self.key + ".pub", os.path.join(self.dir, "authorized_keys"))
            self._write_client_config()
            self.net.create()
            for i in range(len(self.addresses)):
                self.sshd.append(self._start_sshd(i))
            for i in range(len(self.addresses)):
                self._wait_sshd(i)
        except BaseException:
            self.stop()
            raise

    def _keygen(self, path: str) -> None:
        for old in (path, path + ".pub"):  # ssh-keygen would ask before overwriting
            if os.path.exists(old):
                os.remove(old)
        r = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "jm-hosts",
                            "-f", path], stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=30)
        if r.returncode != 0:
            raise HostsError(f"ssh-keygen -f {path}: {r.stderr.strip()}")

    def _write_client_config(self) -> None:
        with open(self.ssh_config, "w") as f:
            f.write(f"Host {' '.join(self.addresses)}\n"
                    "  User root\n"
                    f"  IdentityFile {self.key}\n"
                    "  IdentitiesOnly yes\n"
                    "  BatchMode yes\n"
                    "  StrictHostKeyChecking no\n"
                    f"  UserKnownHostsFile {os.path.join(self.dir, 'known_hosts')}\n"
                    "  GlobalKnownHostsFile /dev/null\n"
                    "  ConnectTimeout 10\n"
                    "  ServerAliveInterval 5\n"
                    "  LogLevel ERROR\n")
            for address, env in zip(self.addresses, self.host_env):
                if env:
                    pairs = " ".join(f'{k}="{v}"' for k, v in env.items())
                    f.write(f"Match host {address}\n  SetEnv {pairs}\n")

    def _start_sshd(self, i: int) -> subprocess.Popen:
        d = os.path.join(self.dir, f"sshd{i}")
        os.makedirs(d, exist_ok=True)
        host_key = os.path.join(d, "host_ed25519")
        self._keygen(host_key)
        conf = os.path.join(d, "sshd_config")
        with open(conf, "w") as f:
            f.write(f"ListenAddress {self.addresses[i]}:22\n"
                    f"HostKey {host_key}\n"
                    f"PidFile {os.path.join(d, 'sshd.pid')}\n"
                    f"AuthorizedKeysFile {os.path.join(self.dir, 'authorized_keys')}\n"
                    "PermitRootLogin prohibit-password\n"
                    "PubkeyAuthentication yes\n"
                    "PasswordAuthentication no\n"
                    "KbdInteractiveAuthentication no\n"
                    "UsePAM no\n"
                    "StrictModes no\n"  # the key lives under /tmp (world-writable)
                    "PrintMotd no\n"
                    "PrintLastLog no\n"
                    "X11Forwarding no\n"
                    "MaxStartups 100\n"
                    "LogLevel INFO\n"
                    + (f"AcceptEnv {' '.join(self.host_env[i])}\n" if self.host_env[i]
                       else ""))
        log = open(os.path.join(d, "sshd.log"), "ab")
        try:
            # ip netns exec execs sshd in place: the Popen pid is sshd's own
            return subprocess.Popen([*self.net.exec_prefix(i), SSHD, "-D", "-e", "-f", conf],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        finally:
            log.close()

    def _wait_sshd(self, i: int) -> None:
        """Until host i's sshd accepts TCP connections from the root namespace."""
        def up() -> bool:
            if self.sshd[i].poll() is not None:
                raise HostsError(f"sshd on {self.addresses[i]} exited "
                                 f"{self.sshd[i].returncode}: {self.sshd_log(i)}")
            with socket.create_connection((self.addresses[i], 22), timeout=2):
                return True
        try:
            wait_until(up, self.startup_timeout, f"sshd on {self.addresses[i]}:22 up", 0.05,
                       errors=(OSError,))
        except TimeoutError as exc:
            raise HostsError(f"{exc}; log: {self.sshd_log(i)}") from None

    def sshd_log(self, i: int) -> str:
        try:
            with open(os.path.join(self.dir, f"sshd{i}", "sshd.log")) as f:
                return f.read()[-2000:].strip()
        except OSError:
            return "(no log)"

    def netns_inode(self, i: int) -> int:
        """Inode of host i's network namespace (compare with /proc/<pid>/ns/net)."""
        return os.stat(f"/run/netns/{self.net.namespaces[i]}").st_ino

    def host_of(self, pid: int) -> Optional[int]:
        """Index of the host whose namespace process `pid` runs in, or None."""
        try:
            ino = os.stat(f"/proc/{pid}/ns/net").st_ino
        except OSError:
            return None
        for i in range(len(self.addresses)):
            try:
                if self.netns_inode(i) == ino:
                    return i
            except OSError:
                pass
        return None

    def leftovers(self) -> list[int]:
        """Pids still running inside the namespaces, other than the sshd listeners."""
        sshd = {p.pid for p in self.sshd}
        out = []
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in sshd and _running(int(name)) \
                    and self.host_of(int(name)) is not None:
                out.append(int(name))
        return out

    def stop(self) -> None:
        """Kill what still runs in the namespaces, stop every sshd, delete the namespaces.
        Safe to call twice and after a partial start."""
        try:
            left = self.leftovers() if os.path.isdir("/run/netns") else []
            for pid in left:  # a peer or job left by a failed test: ours by construction
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            for p in self.sshd:
                if p.poll() is None:
                    p.terminate()
            if _wait_gone([p.pid for p in self.sshd], 10):
                for p in self.sshd:
                    if p.poll() is None:
                        p.kill()
            for p in self.sshd:
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
            _wait_gone(left, 10)
        finally:
            self.sshd = []
            self.net.destroy()
            if self._own_dir:
                shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Hosts":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
