"""The peer's engines (Spark Connect servers) at the configured share level: the thin
driver of jm/policy/spark/engines.py's EnginePool. It starts and stops the servers the pool
names, hands them to the work that acquired them and ticks the pool's idle timeout.

Work acquires an engine by its key (`key_for(tenant, job_id)`) and a holder name, and
releases it when done; what it gets is the server (its `url`, `ready_file`,
`generation`, `proc`). Where the peer has no embedded Spark, `spark.remote` is the one
engine of every piece of work (a `Remote`), and without either there is none (None).
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Callable, Optional

from jm.policy.spark.enginedeath import OomSuspects, engine_death, oom_suspects
from jm.policy.spark.engines import (PEER_ENGINE, Acquire, EngineKey, EnginePool, Granted, Release,
                                     ShareLevel, Start, Stop, Stopped, Tick, engine_for)
from jm.runtime.sparkserver import SparkConnectServer
from raft.tenants import NO_RUNTIME, TenantRuntime

log = logging.getLogger("jm.engines")

TICK = 2.0  # seconds between idle checks (an idle timeout is at least 10 s)


@dataclass(frozen=True)
class Remote:
    """The Spark Connect server the configuration names (`spark.remote`): every piece of
    work of this peer uses it; it is not this peer's to start or stop."""
    url: str
    ready_file: Optional[str] = None
    generation: int = 0
    proc: None = None


def own_token(key: Optional[EngineKey], server) -> Optional[str]:
    """The token that opens engine `key` to the work given it: a tenant's or a job's
    engine's own (None for the peer's engine, whose token every child of the peer has, or
    for spark.remote)."""
    token = getattr(server, "token", None)
    return token if token and key is not None and key.owner else None


class NoEngine(Exception):
    """No engine could be had in time (the peer's engines are all in use)."""


class Engines:
    """Acquire and release engines; the pool decides which servers run."""

    def __init__(self, level: ShareLevel, idle_timeout: float, max_engines: int,
                 make: Callable[[EngineKey, TenantRuntime], SparkConnectServer],
                 remote: Optional[str] = None, embedded: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.level = level if embedded else ShareLevel.PEER
        self.embedded = embedded
        self.remote = Remote(remote) if remote and not embedded else None
        self.make = make            # a server for a key, run as a tenant's (not started)
        # how an engine runs: its tenant's OS user, memory and CPU (at its next start)
        self.runtimes: dict[EngineKey, TenantRuntime] = {}
        # who hears of a server stopped for good (its guard lifted, its SQL worker closed)
        self.on_stopped: list[Callable[[EngineKey, SparkConnectServer], None]] = []
        # who hears of an engine's JVM that died (it restarts): (key, why in one line, the
        # Connect sessions whose statement ran when it ran out of memory)
        self.on_lost: list[Callable[[EngineKey, str, OomSuspects], None]] = []
        self.clock = clock
        self.pool = EnginePool(idle_timeout, max_engines,
                               pinned=(PEER_ENGINE,) if self.level == ShareLevel.PEER else ())
        self.servers: dict[EngineKey, SparkConnectServer] = {}
        self._grants: dict[tuple[EngineKey, str], asyncio.Future] = {}
        self._tasks: set[asyncio.Task] = set()
        self._ticker: Optional[asyncio.Task] = None
        if embedded:  # the pinned engine exists (not started) from now on
            for ins in self.pool.boot(clock()):
                self.servers[ins.key] = make(ins.key, NO_RUNTIME)

    @property
    def available(self) -> bool:
        """Whether this peer's work has Spark at all (embedded engines or spark.remote)."""
        return self.embedded or self.remote is not None

    def at(self, url: Optional[str]) -> tuple[str, int]:
        """The name of the engine at `url` and which start of it this is (`peer`, 0 for
        spark.remote or a URL that is not one of this peer's engines)."""
        for key, server in self.servers.items():
            if server.url == url:
                return key.name, server.generation
        return "peer", 0

    def key_for(self, tenant: Optional[str], job_id: Optional[str] = None) -> EngineKey:
        return engine_for(self.level, tenant, job_id)

    @property
    def peer_engine(self) -> Optional[SparkConnectServer]:
        """The engine of `share-level: peer` (started with the peer), if any."""
        return self.servers.get(PEER_ENGINE)

    def start(self) -> None:
        if not self.embedded:
            return
        for server in self.servers.values():
            server.start()
        self._ticker = asyncio.create_task(self._tick())

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(TICK)  # a timer: the pool's idle timeouts
            self._perform(self.pool.handle(Tick(), self.clock()))

    async def acquire(self, key: EngineKey, holder: str, timeout: float,
                      runtime: TenantRuntime = NO_RUNTIME):
        """The engine of `key` for `holder` (started if need be, as its tenant's
        `runtime` has it: OS user, memory, CPU; not necessarily ready: its clients wait
        for its ready file). Raises NoEngine after `timeout` while every engine of the
        peer is in use."""
        if not self.embedded:
            return self.remote
        if key != PEER_ENGINE:
            self.runtimes[key] = runtime  # (for its next start)
        fut = self._grants.get((key, holder))
        if fut is None or fut.cancelled():
            fut = self._grants[(key, holder)] = asyncio.get_running_loop().create_future()
            self._perform(self.pool.handle(Acquire(key, holder), self.clock()))
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except asyncio.TimeoutError:
            self.release(key, holder)
            raise NoEngine(
                f"no Spark engine for {key.name} within {timeout:.0f} s: this peer runs "
                f"{len(self.servers)} engines (spark.connect.engine.max-per-peer), all in "
                "use") from None

    def release(self, key: EngineKey, holder: str) -> None:
        if not self.embedded:
            return
        fut = self._grants.pop((key, holder), None)
        if fut is not None and not fut.done():
            fut.cancel()
        self._perform(self.pool.handle(Release(key, holder), self.clock()))

    def _perform(self, instructions: list) -> None:
        for ins in instructions:
            if isinstance(ins, Start):
                server = self.servers[ins.key] = self.make(
                    ins.key, self.runtimes.get(ins.key, NO_RUNTIME))
                log.info("engine %s starting (share level %s)", ins.key.name,
                         self.level.value)
                server.start()
            elif isinstance(ins, Stop):
                log.info("engine %s stopping: %s", ins.key.name, ins.reason)
                task = asyncio.create_task(self._stop(ins.key))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            elif isinstance(ins, Granted):
                fut = self._grants.get((ins.key, ins.holder))
                if fut is not None and not fut.done():
                    fut.set_result(self.servers[ins.key])

    async def _stop(self, key: EngineKey) -> None:
        server = self.servers.get(key)
        try:
            if server is not None:
                await server.close()
        except Exception:
            log.exception("stopping engine %s", key.name)
        finally:
            self.servers.pop(key, None)
            for hook in self.on_stopped if server is not None else ():
                try:
                    hook(key, server)
                except Exception:
                    log.exception("after stopping engine %s", key.name)
            self._perform(self.pool.handle(Stopped(key), self.clock()))
            if key not in self.servers:  # (not started again for work that waited)
                self.runtimes.pop(key, None)

    def lost(self, key: EngineKey, code: Optional[int], log_tail: str,
             over_limit: int = 0) -> None:
        """The JVM of engine `key` died (its server restarts it): its work is lost. Its
        log is read in a thread (megabytes of it: not on the event loop)."""
        task = asyncio.ensure_future(self._lost(key, code, log_tail, over_limit))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _lost(self, key: EngineKey, code: Optional[int], log_tail: str,
                    over_limit: int) -> None:
        why, suspects = await asyncio.to_thread(_death, key.name, code, log_tail, over_limit)
        log.error("engine %s: %s%s", key.name, why,
                  f" ({suspects.describe()} running)" if suspects else "")
        for hook in self.on_lost:
            try:
                hook(key, why, suspects)
            except Exception:
                log.exception("after the loss of engine %s", key.name)

    def rows(self) -> list[dict]:
        """What /nodes/{id} shows of each engine: who holds it, its URL and JVM."""
        out = []
        for key, server in sorted(self.servers.items()):
            proc = server.proc
            out.append({"engine": key.name, "share-level": key.level.value,
                        "owner": key.owner or None, "url": server.url,
                        "pid": proc.pid if proc is not None and proc.returncode is None
                        else None,
                        "ready": server.ready.is_set(), "restarts": server.restarts,
                        "holders": len(self.pool.holders(key))})
        return out

    async def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        for fut in self._grants.values():
            if not fut.done():
                fut.cancel()
        servers = list(self.servers.values())
        if servers:
            await asyncio.gather(*(s.close() for s in servers), return_exceptions=True)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=15)


def _death(name: str, code: Optional[int], log: str, over_limit: int
           ) -> tuple[str, OomSuspects]:
    """Why engine `name` died and whose work ran it out of memory, from its log."""
    why = engine_death(name, code, log, over_limit)
    return why, (oom_suspects(log, at_end=bool(over_limit)) if code is not None
                 else OomSuspects())
