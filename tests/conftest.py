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
        from tests.helpers import CLASS_ARCHIVE
        settings = settings or {}
        if spark or settings.get("spark.connect.embedded"):  # (its JVMs map the archive)
            settings = {"spark.class-archive": CLASS_ARCHIVE, **settings}
        conf = {"jobmanager.log.level": "INFO", **settings}
        super().__init__(peers=n, conf=conf, base_dir=base, startup_timeout=30, spark=spark)


def pytest_collection_finish(session) -> None:
    """A run with slow tests (the ones that start Spark) makes the class-data archive of
    Spark's JVM first, once (tests.helpers.CLASS_ARCHIVE): every Spark JVM of the run
    then starts in half the CPU. Without it they start as they would anyway."""
    if not any(item.get_closest_marker("slow") for item in session.items):
        return
    import fcntl
    import subprocess
    from tests.helpers import CLASS_ARCHIVE, ROOT
    os.makedirs(os.path.dirname(CLASS_ARCHIVE), exist_ok=True)
    with open(CLASS_ARCHIVE + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # (one maker among pytest-xdist's workers)
        if os.path.exists(CLASS_ARCHIVE):
            return
        r = subprocess.run([sys.executable, "-m", "jm.runtime.classarchive", CLASS_ARCHIVE,
                            "--java-opts", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"],
                           cwd=ROOT, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            print(f"warning: no class-data archive for Spark: {r.stderr.strip()}",
                  file=sys.stderr)


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
