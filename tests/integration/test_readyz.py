"""/readyz through real peers: ready once joined with a valid lease; not ready (503, with
the reason) when the peer lost its quorum; open without the token, like /healthz."""
from tests.conftest import running
from tests.helpers import ahttp, apoll


async def test_ready_once_joined_and_not_without_a_quorum(tmp_path):
    async with running(str(tmp_path), 3, {"rest.auth.token": "tok"}) as c:
        for i in range(3):
            s, b = await ahttp("GET", c.url(i) + "/readyz")
            assert s == 200 and b["ready"] and b["registered"] and b["lease-valid"], b
        s, b = await ahttp("GET", c.url(0) + "/overview")
        assert s == 401  # the rest needs the token
        await c.peers[1].stop()
        await c.peers[2].stop()

        async def not_ready():
            s, b = await ahttp("GET", c.url(0) + "/readyz")
            return b if s == 503 else None
        b = await apoll(not_ready, 30, what="peer 0 not ready without a quorum")
        assert not b["ready"] and "lease not valid" in b["reasons"]
