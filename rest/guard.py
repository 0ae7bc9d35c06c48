"""REST guards against browsers used as a weapon (drive-by POSTs, DNS rebinding) and
bodies of the wrong kind. Decisions are in jm.policy.members.security; this is the aiohttp shell.

- A request whose Host header is not a name of this peer is refused (403) while no
  `rest.auth.token` is set: a DNS-rebinding page reaches a local cluster under a name of its
  own. `rest.allowed-hosts` adds names (a load balancer's, a Kubernetes Service's; `*`: any).
- A write (POST, PUT, PATCH, DELETE) that a browser sent from another origin (its Origin
  header names another host:port) is refused (403) unless `rest.allowed-origins` lists it.
- A body on a JSON route must be JSON: an explicit other Content-Type is a 415 (forms and
  text/plain are what a page can send without asking the server first).
"""
from __future__ import annotations

import ipaddress
from typing import Iterable, Optional
from urllib.parse import urlsplit

from aiohttp import web

from jm.api import ApiError

LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
UNSAFE = ("POST", "PUT", "PATCH", "DELETE")
OPEN = ("/healthz", "/readyz")  # probes call peers by whatever address they have
NON_JSON_ROUTES = ("/artifacts",)  # multipart uploads


# ---- decisions (pure) -----------------------------------------------------------------
def allowed_hosts(configured: Iterable[str], own_hosts: Iterable[str]) -> Optional[set[str]]:
    """The Host header names REST answers to (lower case, without the port); None: any.
    Default: loopback names and addresses, the hosts of conf/masters and the bind address
    (a DNS-rebinding page reaches a peer under its own, attacker-chosen name)."""
    conf = [h.strip().lower() for h in configured if h.strip()]
    if "*" in conf:
        return None
    return ({"localhost", "127.0.0.1", "::1", *LOOPBACK_NAMES}
            | {h.strip().strip("[]").lower() for h in own_hosts if h} | set(conf))


def host_of(header: str) -> str:
    """'name:port' / '[v6]:port' / 'name' -> the name, lower case."""
    h = header.strip().lower()
    if h.startswith("["):
        return h[1:h.find("]")] if "]" in h else h[1:]
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


def host_allowed(header: Optional[str], allowed: Optional[set[str]]) -> bool:
    if allowed is None:
        return True
    if not header:  # HTTP/1.0 without Host: no browser sends that
        return True
    name = host_of(header)
    if name in allowed:
        return True
    try:  # any literal address of this machine is no rebinding (a name is needed for that)
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


def origin_allowed(origin: Optional[str], host: Optional[str],
                   allowed_origins: Iterable[str]) -> bool:
    """A request with an Origin header (sent by browsers) changes nothing unless it comes
    from this peer's own pages (same host and port) or an origin of rest.allowed-origins:
    a page elsewhere cannot make the browser submit a job to a local cluster."""
    if not origin:  # not from a browser (curl, the CLI, peers)
        return True
    allowed = {o.strip().rstrip("/").lower() for o in allowed_origins if o.strip()}
    o = origin.strip().rstrip("/").lower()
    if "*" in allowed or o in allowed:
        return True
    if o == "null":
        return False
    parts = urlsplit(o)
    return bool(host) and parts.netloc == host.strip().lower()


JSON_TYPES = ("application/json",)


def json_content_type(content_type: Optional[str]) -> bool:
    """application/json or any +json type (parameters such as charset aside)."""
    if not content_type:
        return False
    base = content_type.split(";", 1)[0].strip().lower()
    return base in JSON_TYPES or base.endswith("+json")


# ---- the middleware -----------------------------------------------------------------
def guard_middleware(token: Optional[str], hosts: Iterable[str], allowed: Iterable[str],
                     origins: Iterable[str]):
    names = None if token else allowed_hosts(allowed, hosts)
    origins = list(origins)

    @web.middleware
    async def middleware(request: web.Request, handler):
        if request.path not in OPEN:
            host = request.headers.get("Host")
            if not host_allowed(host, names):
                raise ApiError(403, f"Host {host!r} is not a name of this peer (a DNS-rebinding "
                                    "page?); add it to rest.allowed-hosts, or set "
                                    "rest.auth.token")
            if request.method in UNSAFE:
                origin = request.headers.get("Origin")
                if not origin_allowed(origin, host, origins):
                    raise ApiError(403, f"a {request.method} from the web page of another origin "
                                        f"({origin}) is refused; add it to rest.allowed-origins "
                                        "if it is yours")
                ctype = request.headers.get("Content-Type")
                if (ctype and request.path not in NON_JSON_ROUTES and request.body_exists
                        and not json_content_type(ctype)):
                    raise ApiError(415, f"Content-Type must be application/json, not {ctype!r} "
                                        "(curl: -H 'Content-Type: application/json')")
        return await handler(request)
    return middleware
