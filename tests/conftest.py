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


_ARCHIVE: dict = {}  # the class-data archive being made: its process and lock
# slow tests that start no Spark, run first while the archive is being made (about 35 s of
# CPU), so that the Spark tests after them start their JVMs from it
NO_SPARK_FIRST = ("tests/e2e/test_clock.py",)


def pytest_collection_modifyitems(session, config, items) -> None:
    first = [i for i in items if i.nodeid.split("::")[0] in NO_SPARK_FIRST]
    if first:
        items[:] = first + [i for i in items if i.nodeid.split("::")[0] not in NO_SPARK_FIRST]


def pytest_collection_finish(session) -> None:
    """A run with slow tests (the ones that start Spark) makes the class-data archive of
    Spark's JVM (tests.helpers.CLASS_ARCHIVE) once, in the background: the Spark JVMs
    started after it is there (atomically, whole) start in half the CPU; the ones before
    start as they would without it. The tests never wait for it."""
    if not any(item.get_closest_marker("slow") for item in session.items):
        return
    import fcntl
    import subprocess
    from tests.helpers import CLASS_ARCHIVE, FAST_JVM, ROOT
    if os.path.exists(CLASS_ARCHIVE):
        return
    os.makedirs(os.path.dirname(CLASS_ARCHIVE), exist_ok=True)
    lock = open(CLASS_ARCHIVE + ".lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # (one maker: pytest-xdist)
    except OSError:
        lock.close()
        return
    out = open(CLASS_ARCHIVE + ".log", "w")
    _ARCHIVE.update(lock=lock, out=out, proc=subprocess.Popen(
        [sys.executable, "-m", "jm.runtime.classarchive", CLASS_ARCHIVE,
         "--java-opts", FAST_JVM],
        cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True))


def pytest_sessionfinish(session) -> None:
    """The archive's maker stopped if it still runs (by its process group), its lock let go."""
    import signal
    proc = _ARCHIVE.pop("proc", None)
    if proc is not None:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        _ARCHIVE.pop("out").close()
        _ARCHIVE.pop("lock").close()


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
