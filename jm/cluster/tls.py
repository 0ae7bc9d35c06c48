"""HTTPS for REST and for the calls peers make to each other (rest.ssl.*, in the spirit of
Flink's security.ssl.rest.*; PEM files instead of Java key stores).

With `rest.ssl.enabled: true` a peer serves REST over TLS with `rest.ssl.certificate` and
`rest.ssl.key`, and calls other peers over https, verifying their certificates against
`rest.ssl.ca` (default: the system's CAs) and their names against conf/masters. The Raft
port has its own protection: pysyncobj encrypts every message with `raft.password`
(default: cluster.secret)."""
from __future__ import annotations

import ssl
from typing import Optional, Union

from jm.config import Config, ConfigError


def server_context(conf: Config) -> Optional[ssl.SSLContext]:
    if not conf["rest.ssl.enabled"]:
        return None
    if not conf["rest.ssl.certificate"] or not conf["rest.ssl.key"]:
        raise ConfigError("rest.ssl.enabled needs rest.ssl.certificate and rest.ssl.key "
                          "(PEM files of this peer's certificate chain and private key)")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    cert, key = conf.path("rest.ssl.certificate"), conf.path("rest.ssl.key")
    try:
        ctx.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"rest.ssl.certificate / rest.ssl.key: cannot load {cert} and "
                          f"{key}: {exc}") from None
    return ctx


def client_context(conf: Config) -> Union[ssl.SSLContext, bool]:
    """What peers verify each other with (aiohttp's `ssl=`): True (the defaults) when
    REST is plain HTTP."""
    if not conf["rest.ssl.enabled"]:
        return True
    ca = conf.path("rest.ssl.ca") if conf["rest.ssl.ca"] else None
    try:
        ctx = ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"rest.ssl.ca: cannot load {ca}: {exc}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def scheme(conf: Config) -> str:
    return "https" if conf["rest.ssl.enabled"] else "http"
