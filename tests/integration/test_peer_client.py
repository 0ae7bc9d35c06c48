"""The one client a peer talks to other peers with, against a real aiohttp server: it
shows the credential, asks for an index when told, keeps one pooled connection, and
turns every way a peer can fail to answer into PeerUnreachable."""
import asyncio

import pytest
from aiohttp import web

from jm.cluster.peerclient import PeerClient, PeerUnreachable


async def serve(routes):
    app = web.Application()
    app.add_routes(routes)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    return runner, f"http://127.0.0.1:{port}"


async def test_credential_index_errors_and_one_connection():
    seen = []

    async def echo(request):
        seen.append((request.headers.get("Authorization"),
                     request.headers.get("X-JM-Min-Index"), request.transport))
        if request.query.get("fail"):
            return web.json_response({"errors": ["not yet"]}, status=503,
                                     headers={"Retry-After": "2"})
        return web.json_response({"got": await request.json() if request.can_read_body
                                  else None})

    async def blob(request):
        return web.Response(body=b"\x00\x01raw")

    runner, url = await serve([web.post("/echo", echo), web.get("/echo", echo),
                               web.get("/blob", blob)])
    client = PeerClient({"Authorization": "Bearer peer-cred"})
    try:
        a = await client.call("POST", url + "/echo", 5, json={"x": 1}, min_index=42)
        assert (a.status, a.body) == (200, {"got": {"x": 1}})
        b = await client.call("GET", url + "/echo", 5, params={"fail": "1"})
        assert (b.status, b.errors(), b.retry_after) == (503, ["not yet"], "2")
        r = await client.read(url + "/blob", 5)
        assert (r.status, r.body) == (200, b"\x00\x01raw")
        assert [s[:2] for s in seen] == [("Bearer peer-cred", "42"), ("Bearer peer-cred", None)]
        assert seen[0][2] is seen[1][2]  # the same pooled connection
    finally:
        await client.close()
        await runner.cleanup()


async def test_every_failure_to_answer_is_peer_unreachable():
    async def not_json(request):
        return web.Response(text="<html>proxy error</html>", status=502)

    released = asyncio.Event()

    async def slow(request):
        await released.wait()
        return web.json_response({})

    runner, url = await serve([web.get("/html", not_json), web.get("/slow", slow)])
    client = PeerClient({})
    try:
        with pytest.raises(PeerUnreachable):
            await client.call("GET", url + "/html", 5)
        with pytest.raises(PeerUnreachable):
            await client.call("GET", url + "/slow", 0.2)
        released.set()
        await runner.cleanup()
        with pytest.raises(PeerUnreachable):  # nobody listens any more
            await client.call("GET", url + "/html", 2)
        with pytest.raises(PeerUnreachable):
            await client.read(url + "/html", 2)
    finally:
        released.set()
        await client.close()
        await runner.cleanup()
