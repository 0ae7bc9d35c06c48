"""The amnesia guard's I/O (decisions: jm/policy/identity.py): the identity file next to
the Raft journal, and what the seeds know (GET /cluster/identity, from their replicas:
no leader needed)."""
from __future__ import annotations

import asyncio
import json
import logging
import os
from typing import Optional

import aiohttp

from jm.config import ConfigError
from jm.policy.identity import NON_VOTER, SeedView, decide

log = logging.getLogger("jm.cluster.identity")
IDENTITY_FILE = "identity"


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


async def ask_identities(urls: list[str], headers: dict, timeout: float = 2.0,
                         ssl: object = True) -> list[SeedView]:
    """What each seed that answers knows (in parallel; the silent ones are left out)."""
    client_timeout = aiohttp.ClientTimeout(total=timeout)

    async def one(http: aiohttp.ClientSession, url: str) -> Optional[SeedView]:
        try:
            async with http.get(url + "/cluster/identity", ssl=ssl) as resp:
                if resp.status != 200:
                    return None
                body = await resp.json()
                return SeedView(body.get("cluster-id") or None,
                                tuple(str(n) for n in body.get("known") or ()))
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, TypeError,
                AttributeError, OSError):
            return None
    async with aiohttp.ClientSession(timeout=client_timeout, headers=headers) as http:
        answers = await asyncio.gather(*(one(http, u) for u in urls))
    return [a for a in answers if a is not None]


async def amnesia_guard(had_data: bool, raft_dir: str, node: str, seeds: list[str],
                        headers: dict, ssl: object, rejoin: bool) -> str:
    """Voter or non-voter (jm/policy/identity.py), or ConfigError: must not start."""
    views = await ask_identities(seeds, headers, ssl=ssl) if seeds else []
    mode, why = decide(had_data, read_identity(raft_dir), node, views, rejoin)
    if mode is None:
        raise ConfigError(why)
    (log.warning if mode == NON_VOTER else log.info)("Raft member %s starts as a %s: %s",
                                                      node, mode, why)
    return mode


async def keep_identity(raft, registered: asyncio.Event, raft_dir: str, node: str) -> None:
    """Once registered, the identity file says which cluster and node this data is."""
    await registered.wait()
    with raft.read() as st:
        cluster_id = st.cluster_id
    if read_identity(raft_dir) != {"cluster-id": cluster_id, "node": node}:
        await asyncio.to_thread(write_identity, raft_dir, cluster_id, node)
