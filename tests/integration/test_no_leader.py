"""Without a Raft majority there is no leader: writes answer 503 with Retry-After and
{"errors": [...]} at once (never a hang), reads keep working from the local replica."""
import time

import aiohttp

from tests.helpers import ahttp, apoll


async def test_writes_get_503_with_retry_after_without_majority(cluster3):
    c = cluster3
    for p in c.peers[1:]:
        await p.stop()
    # a leader cut off from the majority steps down (raft.leader-fallback-timeout); an
    # isolated follower knows no leader once its lease has run out
    async def no_leader():
        s, b = await ahttp("GET", c.url(0) + "/overview")
        return s == 200 and b["leader"] is None
    await apoll(no_leader, 10, what="no leader")
    async with aiohttp.ClientSession() as s:
        t0 = time.monotonic()
        async with s.post(c.url(0) + "/jobs", json={"entry": "m:f"}) as r:
            body = await r.json()
            assert r.status == 503
            assert r.headers.get("Retry-After") == "1"
            assert body["errors"] and "leader" in body["errors"][0]
        assert time.monotonic() - t0 < 2.0
        async with s.get(c.url(0) + "/overview") as r:
            assert r.status == 200 and (await r.json())["leader"] is None
        async with s.patch(c.url(0) + "/jobs/x?mode=cancel") as r:
            assert r.status == 503
