"""The read-your-writes protocol of the REST layer (X-JM-Index / X-JM-Min-Index) against
a gateway whose applied index the test moves by hand."""
import asyncio

from aiohttp.test_utils import TestClient, TestServer

from rest.app import make_app


class FakeGateway:
    """The replica and job-views roles of a gateway, in one object."""
    def __init__(self) -> None:
        self.applied = 5
        self._moved = asyncio.Event()
        self.replica = self.views = self

    def applied_index(self) -> int:
        return self.applied

    def advance(self, to: int) -> None:
        self.applied = to
        self._moved.set()

    async def wait_applied(self, index: int, timeout: float) -> bool:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.applied < index:
            self._moved.clear()
            left = deadline - loop.time()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self._moved.wait(), left)
            except asyncio.TimeoutError:
                return False
        return True

    def overview(self):
        return {"view": "overview", "applied": self.applied}


async def _client(gw, wait_timeout=2.0):
    client = TestClient(TestServer(make_app(gw, 1 << 20, wait_timeout=wait_timeout)))
    await client.start_server()
    return client


async def test_every_answer_carries_the_applied_index():
    gw = FakeGateway()
    client = await _client(gw)
    try:
        resp = await client.get("/overview")
        assert resp.status == 200 and resp.headers["X-JM-Index"] == "5"
        resp = await client.get("/no/such/path")  # errors too
        assert resp.status == 404 and resp.headers["X-JM-Index"] == "5"
    finally:
        await client.close()


async def test_a_request_waits_until_the_peer_has_applied_its_index():
    gw = FakeGateway()
    client = await _client(gw)
    try:
        pending = asyncio.ensure_future(client.get("/overview", headers={"X-JM-Min-Index": "7"}))
        await asyncio.wait({pending}, timeout=0.3)
        assert not pending.done()  # index 7 is not applied here yet: no answer
        gw.advance(7)
        resp = await asyncio.wait_for(pending, 5)
        assert resp.status == 200 and (await resp.json())["applied"] == 7
        assert resp.headers["X-JM-Index"] == "7"
        # an index applied already is answered at once
        resp = await client.get("/overview", headers={"X-JM-Min-Index": "3"})
        assert resp.status == 200
    finally:
        await client.close()


async def test_an_index_not_applied_in_time_is_503_with_retry_after():
    gw = FakeGateway()
    client = await _client(gw, wait_timeout=0.2)
    try:
        resp = await client.get("/overview", headers={"X-JM-Min-Index": "99"})
        assert resp.status == 503 and resp.headers["Retry-After"] == "1"
        body = await resp.json()
        assert "99" in body["errors"][0] and "5" in body["errors"][0]
    finally:
        await client.close()


async def test_a_malformed_min_index_is_400():
    gw = FakeGateway()
    client = await _client(gw)
    try:
        for bad in ("abc", "-1", "1.5", ""):
            resp = await client.get("/overview", headers={"X-JM-Min-Index": bad})
            assert resp.status == 400, bad
            assert "X-JM-Min-Index" in (await resp.json())["errors"][0]
    finally:
        await client.close()
