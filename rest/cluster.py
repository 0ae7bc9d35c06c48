"""The cluster's REST routes: membership (add, remove, promote a peer; a voter's start),
drains and rebalancing, and the peer-to-peer heartbeat."""
from __future__ import annotations

from typing import Any, Optional

from aiohttp import web

from jm.api import ApiError
from rest.middleware import caller
from rest.requests import gw, json_body


async def post_rebalance(request: web.Request) -> web.Response:
    return web.json_response(await gw(request).cluster.rebalance())


def _deadline(request: web.Request, body: Any) -> Optional[float]:
    """A drain deadline in seconds: ?deadline=S or {"deadline": S} (None: no deadline)."""
    raw = request.query.get("deadline")
    if raw is None and isinstance(body, dict):
        raw = body.get("deadline")
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ApiError(400, f"deadline must be a number of seconds, got {raw!r}")
    if not 0 <= value < 10 ** 9:
        raise ApiError(400, f"deadline must be between 0 and 1e9 seconds, got {raw!r}")
    return value


async def post_drain(request: web.Request) -> web.Response:
    deadline = _deadline(request, await json_body(request, optional=True))
    return web.json_response(await gw(request).cluster.drain_node(request.match_info["node"], True,
                                                                  deadline), status=202)


async def get_sessions(request: web.Request) -> web.Response:
    """Every open session (SQL gateway, Livy, Spark Connect) the caller may see;
    `?kind=sql|livy|connect`."""
    return web.json_response(gw(request).sessions.page(request.query.get("kind") or None,
                                                       caller(request)))


async def get_cluster_identity(request: web.Request) -> web.Response:
    return web.json_response(gw(request).cluster.identity())


async def get_cluster_peers(request: web.Request) -> web.Response:
    return web.json_response(await gw(request).cluster.members())


async def post_cluster_beat(request: web.Request) -> web.Response:
    """A peer's heartbeat to the leader (peers only: the peer credential)."""
    return web.json_response(await gw(request).cluster.beat(await json_body(request)))


async def post_cluster_peer(request: web.Request) -> web.Response:
    body = await json_body(request, optional=True)
    peer = body.get("peer") if isinstance(body, dict) else None
    if not isinstance(peer, str) or not peer.strip():
        raise ApiError(400, 'the body must be {"peer": "HOST:REST-PORT:RAFT-PORT"}')
    return web.json_response(await gw(request).cluster.add_peer(peer.strip()), status=201)


async def post_promote(request: web.Request) -> web.Response:
    return web.json_response(await gw(request).cluster.promote_peer(request.match_info["node"]))


async def post_cluster_voter(request: web.Request) -> web.Response:
    """The promoter asks this peer to start its voting node (peers only)."""
    return web.json_response(await gw(request).cluster.prepare_voter(await json_body(request)))


async def delete_cluster_voter(request: web.Request) -> web.Response:
    return web.json_response(await gw(request).cluster.abandon_voter())


async def delete_cluster_peer(request: web.Request) -> web.Response:
    deadline = _deadline(request, await json_body(request, optional=True))
    return web.json_response(await gw(request).cluster.remove_peer(request.match_info["node"],
                                                                   deadline), status=202)


async def delete_drain(request: web.Request) -> web.Response:
    return web.json_response(await gw(request).cluster.drain_node(request.match_info["node"],
                                                                  False))


def add_routes(app: web.Application) -> None:
    r = app.router
    r.add_post("/cluster/rebalance", post_rebalance)
    r.add_post("/nodes/{node}/drain", post_drain)
    r.add_delete("/nodes/{node}/drain", delete_drain)
    r.add_get("/cluster/peers", get_cluster_peers)
    r.add_get("/cluster/identity", get_cluster_identity)
    r.add_get("/cluster/sessions", get_sessions)
    r.add_post("/cluster/peers", post_cluster_peer)
    r.add_post("/cluster/beat", post_cluster_beat)
    r.add_delete("/cluster/peers/{node}", delete_cluster_peer)
    r.add_post("/cluster/peers/{node}/promote", post_promote)
    r.add_post("/cluster/voter", post_cluster_voter)
    r.add_delete("/cluster/voter", delete_cluster_voter)
