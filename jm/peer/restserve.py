"""The peer's REST server: the aiohttp app on the gateway, its connection limits (a share
kept for the other peers), keep-alive, TLS, and what host names are this peer's."""
from __future__ import annotations

import asyncio
import logging
import socket
from typing import Callable, Optional

from aiohttp import web

from jm.cluster.api.gateway import PeerGateway
from jm.cluster.metrics import PeerMetrics
from jm.config import Config, ConfigError, PeerAddress
from jm.policy.members.security import start_refusal
from rest.app import HEALTH_EXTRA, make_app
from rest.connlimit import limit_connections

log = logging.getLogger("jm.cluster.peer")


def check_exposure(conf: Config, me: PeerAddress, token: Optional[str],
                   secret: Optional[str]) -> None:
    """Safe by default (jm.policy.members.security.start_refusal): ConfigError when REST or
    Raft listens beyond loopback without rest.auth.token and cluster.secret."""
    refusal, warnings = start_refusal(
        [conf["rest.bind-address"] or me.host, me.host], token, secret,
        conf["raft.password"], conf["security.insecure"], resolve)
    if refusal:
        raise ConfigError(refusal)
    for w in warnings:
        log.warning("%s", w)


async def serve_rest(gateway: PeerGateway, conf: Config, me: PeerAddress,
                     masters: list[PeerAddress], token: Optional[str],
                     peer_credential: Optional[str], metrics: PeerMetrics,
                     client_ssl, ssl_server, health: Callable[[], dict]) -> web.AppRunner:
    """Serve REST on this peer's address; the runner, for its cleanup."""
    app = make_app(gateway, conf["rest.max-body-size"], token=token,
                   peer_credential=peer_credential, metrics=metrics,
                   wait_timeout=conf["rest.write-timeout"],
                   hosts=tuple({m.host for m in masters} | {
                       me.host, conf["rest.bind-address"] or me.host,
                       socket.gethostname(), socket.getfqdn()}),
                   allowed_hosts=conf["rest.allowed-hosts"],
                   allowed_origins=conf["rest.allowed-origins"], client_ssl=client_ssl)
    app[HEALTH_EXTRA] = [health]  # disk-low in /healthz
    # a stopping peer gives requests in flight (a write waits up to rest.write-timeout
    # for Raft) a few seconds, then cancels them: stopping never waits for clients
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=3.0,
                           keepalive_timeout=conf["rest.keepalive-timeout"])
    await runner.setup()
    # the share of connections kept for peers: those from conf/masters' addresses
    peer_addresses = await addresses({m.host for m in masters})
    limit_connections(runner, conf["rest.max-connections"],
                      conf["rest.max-connections-per-source"], peer_addresses.__contains__)
    site = web.TCPSite(runner, conf["rest.bind-address"] or me.host, me.rest_port,
                       ssl_context=ssl_server, reuse_address=True)
    await site.start()
    return runner


async def addresses(hosts: set[str], timeout: float = 2.0) -> set[str]:
    """The addresses these host names resolve to now (in parallel, each given `timeout`
    s: a name that does not resolve yet, a pod not yet up, is left out)."""
    loop = asyncio.get_running_loop()

    async def one(host: str) -> list[str]:
        try:
            infos = await asyncio.wait_for(loop.getaddrinfo(host, None), timeout)
        except (OSError, asyncio.TimeoutError):
            return []
        return [str(info[4][0]) for info in infos]
    found = await asyncio.gather(*(one(h) for h in sorted(hosts)))
    return {a for each in found for a in each}


def resolve(name: str) -> list[str]:
    """The addresses of a host name ([] if it does not resolve)."""
    try:
        return [ai[4][0] for ai in socket.getaddrinfo(name, None)]
    except OSError:
        return []
