"""The amnesia guard's I/O (decisions: jm/policy/members/identity.py): the identity file next to
the Raft journal, and what the seeds know (GET /cluster/identity, from their replicas:
no leader needed)."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from typing import Any, Optional

from aiohttp import web

from jm.config import ConfigError
from jm.cluster.peerclient import PeerClient, PeerUnreachable
from jm.policy.members.identity import NON_VOTER, WAIT, SeedView, decide

log = logging.getLogger("jm.cluster.identity")
IDENTITY_FILE = "identity"
RETRY = 0.5  # s between two rounds of questions to the seeds


def read_identity(raft_dir: str) -> Optional[dict]:
    try:
        with open(os.path.join(raft_dir, IDENTITY_FILE)) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def write_identity(raft_dir: str, cluster_id: Optional[str], node: str) -> None:
    """Atomically and durably (a power cut leaves the old file or the new one)."""
    path = os.path.join(raft_dir, IDENTITY_FILE)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"cluster-id": cluster_id, "node": node}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(raft_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


async def ask_identities(urls: list[str], client: PeerClient,
                         timeout: float = 2.0) -> list[SeedView]:
    """What each seed that answers knows (in parallel; the silent ones are left out)."""
    async def one(url: str) -> Optional[SeedView]:
        try:
            answer = await client.call("GET", url + "/cluster/identity", timeout)
            body = answer.body
            if answer.status != 200:
                return None
            return SeedView(body.get("cluster-id") or None,
                            tuple(str(n) for n in body.get("known") or ()),
                            body.get("starting") is True, body.get("has-data") is True)
        except (PeerUnreachable, TypeError, AttributeError):
            return None
    answers = await asyncio.gather(*(one(u) for u in urls))
    return [a for a in answers if a is not None]


async def amnesia_guard(had_data: bool, raft_dir: str, node: str, seeds: list[str],
                        client: PeerClient, rejoin: bool, wait: float = 60.0) -> str:
    """Voter or non-voter (jm/policy/members/identity.py), or ConfigError: must not start. Asks
    the seeds again (every RETRY s) while they cannot tell, for up to `wait` s."""
    deadline = time.monotonic() + wait
    logged = False
    while True:
        views = await ask_identities(seeds, client) if seeds else []
        mode, why = decide(had_data, read_identity(raft_dir), node, views, rejoin,
                           final=time.monotonic() >= deadline, seeds=bool(seeds))
        if mode != WAIT:
            break
        if not logged:
            log.warning("Raft member %s has no Raft data: waiting up to %g s for a seed "
                        "(conf/masters) that can say whether the cluster knows it", node, wait)
            logged = True
        await asyncio.sleep(RETRY)
    if mode is None:
        raise ConfigError(why)
    (log.warning if mode == NON_VOTER else log.info)("Raft member %s starts as a %s: %s",
                                                     node, mode, why)
    return mode


def early_answer(had_data: bool, raft_dir: str, node: str) -> dict:
    """What this peer answers GET /cluster/identity with before its Raft starts: the
    cluster its data belongs to, if any, and that it cannot say yet whom it knows."""
    cluster = (read_identity(raft_dir) or {}).get("cluster-id") if had_data else None
    return {"cluster-id": cluster, "node": node, "known": [], "starting": True,
            "has-data": had_data}


async def serve_early(host: str, port: int, ssl_context: Any, answer: dict,
                      middleware: Any) -> web.AppRunner:
    """GET /cluster/identity (`answer`) on the REST port while the peer starts, so that
    the peers of a new cluster, all starting, find each other (jm/policy/members/identity.py);
    every other route is a 503. The caller cleans it up before the REST app binds."""
    async def identity(request: web.Request) -> web.Response:
        return web.json_response(answer)

    async def starting(request: web.Request) -> web.Response:
        return web.json_response({"errors": ["the peer is starting"]}, status=503,
                                 headers={"Retry-After": "1"})
    app = web.Application(middlewares=[middleware])
    app.router.add_get("/cluster/identity", identity)
    app.router.add_route("*", "/{tail:.*}", starting)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port, ssl_context=ssl_context,
                          reuse_address=True).start()
    except BaseException:
        await runner.cleanup()
        raise
    return runner


async def keep_identity(raft, registered: asyncio.Event, raft_dir: str, node: str) -> None:
    """Once registered, the identity file says which cluster and node this data is."""
    await registered.wait()
    with raft.read() as st:
        cluster_id = st.cluster_id
    if read_identity(raft_dir) != {"cluster-id": cluster_id, "node": node}:
        await asyncio.to_thread(write_identity, raft_dir, cluster_id, node)
