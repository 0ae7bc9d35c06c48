"""Test hosts on this machine: one network namespace per peer, joined by veth pairs to a
bridge in the root namespace (needs root and iproute2). A partition takes a peer's link
down; healing brings it up. Addresses are in a private /24 that exists only inside the
namespaces and on the bridge this module creates, and everything is removed again."""
from __future__ import annotations

import os
import subprocess


class NetnsError(RuntimeError):
    pass


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


def available() -> bool:
    """True when we may create namespaces here (root and iproute2)."""
    if os.geteuid() != 0:
        return False
    name = f"jmprobe{os.getpid()}"
    try:
        _ip("netns", "add", name)
        _ip("netns", "del", name)
        return True
    except (NetnsError, FileNotFoundError, subprocess.TimeoutExpired):
        return False


class TestNet:
    """n hosts: namespaces <prefix>0.., addresses 10.<subnet>.0.2.. on bridge <prefix>br."""

    def __init__(self, n: int, prefix: str = "jmc", subnet: int = 213) -> None:
        self.n = n
        self.prefix = prefix
        self.bridge = f"{prefix}br"
        self.subnet = subnet
        self.hosts = [f"10.{subnet}.0.{2 + i}" for i in range(n)]
        self.namespaces = [f"{prefix}{i}" for i in range(n)]

    def veth(self, i: int) -> tuple[str, str]:
        return f"{self.prefix}v{i}", f"{self.prefix}p{i}"  # root side, namespace side

    def create(self) -> None:
        self.destroy()
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            _ip("addr", "add", f"10.{self.subnet}.0.1/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for i, ns in enumerate(self.namespaces):
                root_end, ns_end = self.veth(i)
                _ip("netns", "add", ns)
                _ip("link", "add", root_end, "type", "veth", "peer", "name", ns_end)
                _ip("link", "set", ns_end, "netns", ns)
                _ip("link", "set", root_end, "master", self.bridge)
                _ip("link", "set", root_end, "up")
                _ip("-n", ns, "addr", "add", f"{self.hosts[i]}/24", "dev", ns_end)
                _ip("-n", ns, "link", "set", ns_end, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
        except BaseException:
            self.destroy()
            raise

    def partition(self, i: int) -> None:
        """Cut host i off from every other host (and from the root namespace)."""
        _ip("link", "set", self.veth(i)[0], "down")

    def heal(self, i: int) -> None:
        _ip("link", "set", self.veth(i)[0], "up")

    def exec_prefix(self, i: int) -> list[str]:
        return ["ip", "netns", "exec", self.namespaces[i]]

    def destroy(self) -> None:
        for i, ns in enumerate(self.namespaces):
            _ip("link", "del", self.veth(i)[0], check=False)
            _ip("netns", "del", ns, check=False)
        _ip("link", "del", self.bridge, check=False)

    def __enter__(self) -> "TestNet":
        self.create()
        return self

    def __exit__(self, *exc) -> None:
        self.destroy()
