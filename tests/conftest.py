import contextlib
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


from jm.testing import MiniCluster  # noqa: E402


class InProcessCluster(MiniCluster):
    """N real peers (real pysyncobj over TCP, real aiohttp, real job processes) in the
    test's asyncio loop: the dask gen_cluster pattern, through the MiniCluster users get."""

    def __init__(self, base: str, n: int, settings: dict | None = None,
                 spark: bool = False) -> None:
        super().__init__(peers=n, conf={"jobmanager.log.level": "INFO", **(settings or {})},
                         base_dir=base, startup_timeout=30, spark=spark)


@contextlib.asynccontextmanager
async def running(base: str, n: int = 3, settings: dict | None = None, spark: bool = False):
    """N started peers; the test's requests (tests.helpers.ahttp / http) read on any peer
    what any peer acknowledged (X-JM-Min-Index), as the CLI and the web UI do."""
    from tests.helpers import consistent_session, end_session
    c = InProcessCluster(base, n, settings, spark=spark)
    consistent_session(c.urls)
    try:
        await c.start()
        yield c
    finally:
        end_session(c.urls)
        await c.stop()


@pytest.fixture
async def cluster3(tmp_path):
    async with running(str(tmp_path)) as c:
        yield c
