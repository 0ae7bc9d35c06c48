"""Security decisions (pure: no I/O but name resolution passed in): when a peer may start,
and the credential peers show each other (which Host, Origin and Content-Type headers REST
accepts is decided in rest/guard.py).

The threat model is in README "Security": anyone who can reach a peer's REST port may run
code through POST /jobs unless `rest.auth.token` is set; anyone who can reach its Raft
port may change the cluster's state unless `cluster.secret` (or `raft.password`) is set.
Hence a peer that listens on anything but loopback refuses to start without both, unless
`security.insecure: true` says the operator knows (a private network, a test bed).
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
from typing import Callable, Iterable, Optional

PEER_CREDENTIAL_PREFIX = "jmpeer."
LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


def peer_credential(secret: str) -> str:
    """What a peer sends other peers as its bearer credential: derived from cluster.secret
    (HMAC-SHA256 with a fixed label), never the secret itself, which may also be the Raft
    password: whoever sees a peer's request learns neither."""
    mac = hmac.new(secret.encode(), b"jm peer REST credential v1", hashlib.sha256)
    return PEER_CREDENTIAL_PREFIX + mac.hexdigest()


def is_loopback(host: str, resolve: Callable[[str], list[str]]) -> bool:
    """`host` (an address or a name) means this machine only: a loopback address, or a
    name whose every address is one. `resolve(name)` -> its addresses ([] if unknown)."""
    h = host.strip().strip("[]").lower()
    if not h:
        return False
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        pass
    if h in LOOPBACK_NAMES:
        return True
    addrs = resolve(h)
    return bool(addrs) and all(_loopback_addr(a) for a in addrs)


def _loopback_addr(a: str) -> bool:
    try:
        return ipaddress.ip_address(a.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def start_refusal(listen_hosts: Iterable[str], token: Optional[str], secret: Optional[str],
                  raft_password: Optional[str], insecure: bool,
                  resolve: Callable[[str], list[str]]) -> tuple[Optional[str], list[str]]:
    """(why this peer must not start, or None; warnings to log). A peer whose REST or Raft
    listens beyond loopback needs rest.auth.token and cluster.secret (or raft.password for
    the Raft port); `security.insecure: true` overrides, loudly."""
    exposed = sorted({h for h in listen_hosts if not is_loopback(h, resolve)})
    if not exposed:
        return None, []
    missing = []
    if not token:
        missing.append("rest.auth.token (or rest.auth.token-file)")
    if not (secret or raft_password):
        missing.append("cluster.secret")
    if not missing:
        return None, []
    what = (f"this peer listens on {', '.join(exposed)} (not loopback) without "
            f"{' and '.join(missing)}: anyone who reaches it could run code on every peer")
    if insecure:
        return None, [f"INSECURE: {what}; running anyway because security.insecure is true"]
    return (f"{what}. Set {' and '.join(missing)} on every peer (README: Security), or "
            "security.insecure: true on a network only you can reach"), []
