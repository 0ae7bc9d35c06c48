"""MiniCluster: N JobManager peers in one process for testing pipelines (Flink's
MiniCluster, in Python). Real Raft on loopback ports, real REST, real job processes;
with `spark=True` one Spark Connect server (started by the first peer) serves them all.

    from jm.testing import MiniCluster

    def test_my_pipeline(tmp_path):
        with MiniCluster(peers=2, spark=True) as mc:
            job = mc.run({"entry": "pipelines.clicks:main", "pyfiles": ["/abs/pipelines/"],
                          "args": {"input": "...", "output": str(tmp_path / "out")}})
            assert job["state"] == "FINISHED", mc.exceptions(job["jid"])

`with` runs the peers on an event loop in a background thread (the helpers below are
blocking); `async with` runs them on the caller's loop (use an async HTTP client then).
Installed with the project, the `mini_cluster` pytest fixture gives a started 2-peer
cluster without Spark (`@pytest.mark.parametrize` it indirectly for other sizes:
`{"peers": 3, "spark": True, "conf": {...}}`).
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import tempfile
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Collection, Optional

from jm.local.localcluster import local_lines, write_conf
from jm.runtime.ports import free_port
from jm.policy.jobs.vocab import TERMINAL  # the states a job ends in

log = logging.getLogger("jm.testing")


class MiniCluster:
    def __init__(self, peers: int = 2, spark: bool = False, conf: Optional[dict] = None,
                 base_dir: Optional[str] = None, startup_timeout: float = 60.0) -> None:
        self.n = peers
        self.spark = spark
        self.base = base_dir or tempfile.mkdtemp(prefix="jm-minicluster-")
        self._own_base = base_dir is None
        self.lines = local_lines(peers)
        self.urls = ["http://127.0.0.1:" + ln.split(":")[1] for ln in self.lines]
        settings = {"spark.connect.embedded": False, "jobmanager.log.level": "WARNING",
                    "rebalance.strategy": "none",
                    "jobmanager.executor.preload": "pyspark" if spark else "none"}
        settings.update(conf or {})
        self.settings = settings
        self.conf_dir = write_conf(self.base, self.lines, settings)
        self.startup_timeout = startup_timeout
        self.peers: list = []
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None

    def masters(self) -> list:
        from jm.config import read_masters
        return read_masters(os.path.join(self.conf_dir, "masters"))

    # ---- lifecycle on the caller's loop -------------------------------------------------
    async def start(self) -> "MiniCluster":
        from jm.config import load_config
        from jm.peer.peer import Peer
        masters = self.masters()
        spark_port = free_port() if self.spark else None
        token = secrets.token_urlsafe(24)  # the shared server's (spark.connect.token)
        for i, m in enumerate(masters):
            overrides: dict[str, Any] = {}
            if self.spark and i == 0:  # the first peer runs the shared Spark server
                overrides = {"spark.connect.embedded": True, "spark.connect.port": spark_port,
                             "spark.connect.token": token}
            elif self.spark:
                overrides = {"spark.remote": f"sc://localhost:{spark_port}/;token={token}"}
            self.peers.append(Peer(load_config(self.conf_dir, overrides), m, masters))
        try:
            await asyncio.gather(*(p.start() for p in self.peers))
            await self._until(self._ready, self.startup_timeout, "every peer registered")
            if self.spark:
                await self._spark_ready(self.peers[0].ground.sparks.server)
                # and every peer's heartbeat has said so (placement prefers ready peers:
                # a session or job placed before would all go to the first peer)
                await self._until(self._all_spark_ready, 60, "every peer's Spark ready")
        except BaseException:
            await self.stop()
            raise
        return self

    async def _spark_ready(self, server, timeout: float = 240.0) -> None:
        """The first peer's Spark Connect server ready; if not within `timeout`, the error
        says how its last start ended (the end of its log)."""
        try:
            await self._until(server.ready.is_set, timeout, "Spark Connect ready")
        except TimeoutError as exc:
            from jm.runtime.sparkjvm import log_tail
            tail = log_tail(os.path.join(server.log_dir, "spark-connect.log"), 4000)
            raise TimeoutError(f"{exc} (port {server.port}, {server.restarts} restarts); "
                               f"the end of its log:\n{tail}") from None

    def _all_spark_ready(self) -> bool:
        for peer in self.peers:
            with peer.parts.raft.read() as st:
                if not all(p.ready for p in st.alive_peers()):
                    return False
        return True

    def _ready(self) -> bool:
        if not all(p.parts.registered.is_set() for p in self.peers):
            return False
        if self.peers[0].parts.raft.leader() is None:
            return False
        for p in self.peers:
            with p.parts.raft.read() as st:
                if len(st.alive_peers()) != len(self.peers):
                    return False
        return True

    @staticmethod
    async def _until(fn, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not fn():
            if time.monotonic() > deadline:
                raise TimeoutError(f"MiniCluster: {what} not within {timeout:g} s")
            await asyncio.sleep(0.05)

    async def stop(self, timeout: float = 30.0) -> None:
        """Stop every peer within `timeout` seconds (each peer bounds its own steps); the
        processes they started are killed by pid whatever happened."""
        peers, self.peers = self.peers, []
        if peers:
            done, _ = await asyncio.wait([asyncio.ensure_future(p.stop()) for p in peers],
                                         timeout=timeout)
            for t in done:
                if not t.cancelled() and t.exception() is not None:
                    log.error("stopping a peer failed: %r", t.exception())
        for p in peers:
            p.kill_processes()
        if self._own_base:  # a temporary folder we made (a given base_dir is kept)
            import shutil
            shutil.rmtree(self.base, ignore_errors=True)

    async def __aenter__(self) -> "MiniCluster":
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    # ---- lifecycle on a background loop ---------------------------------------------------
    def __enter__(self) -> "MiniCluster":
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="minicluster",
                                        daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.start(), self._loop).result()
        except BaseException:
            self._shutdown_loop()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self.stop(), self._loop).result(60)
        finally:
            self._shutdown_loop()

    def _shutdown_loop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()
            self._loop = None

    # ---- blocking helpers (for `with`) ---------------------------------------------------
    def url(self, i: int = 0) -> str:
        return self.urls[i]

    def request(self, method: str, path: str, body: Any = None, peer: int = 0) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.urls[peer] + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                text = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            raise RuntimeError(f"{method} {path}: HTTP {exc.code}: {detail}") from None
        return json.loads(text) if text else None

    def submit(self, spec: dict, peer: int = 0) -> str:
        return self.request("POST", "/jobs", spec, peer)["jobid"]

    def job(self, job_id: str, peer: int = 0) -> dict:
        return self.request("GET", f"/jobs/{job_id}", peer=peer)

    def wait(self, job_id: str, states: Collection[str] = TERMINAL, timeout: float = 120.0) -> dict:
        """Poll until the job is in one of `states`; return its details."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job["state"] in states:
                return job
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} is {job['state']} after {timeout:g} s")
            time.sleep(0.05)

    def run(self, spec: dict, timeout: float = 120.0) -> dict:
        """Submit and wait until the job ends."""
        return self.wait(self.submit(spec), TERMINAL, timeout)

    def exceptions(self, job_id: str) -> dict:
        return self.request("GET", f"/jobs/{job_id}/exceptions")


def _fixture():
    import pytest

    @pytest.fixture
    def mini_cluster(request, tmp_path):
        """A started MiniCluster (2 peers, no Spark unless parametrized)."""
        kw = dict(getattr(request, "param", None) or {})
        kw.setdefault("base_dir", str(tmp_path / "minicluster"))
        with MiniCluster(**kw) as mc:
            yield mc
    return mini_cluster


try:
    mini_cluster = _fixture()
except ImportError:  # pytest is not installed: the fixture is not needed
    pass
