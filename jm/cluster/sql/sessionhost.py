"""The SQL sessions this peer holds, whoever uses them: the SQL gateway's operations
(jm/cluster/sql/sqlgateway.py), Livy's statements (jm/cluster/sql/livyrunner.py) and the
replicated sessions' expiry. A session held here is a Spark Connect session in the SQL
worker of its engine (its tenant's at share-level tenant), opened ahead of its first
statement and rebuilt from its record (properties, state-defining statements) after it
moved here or its engine restarted.

    held(handle, forwarded) -> LocalSession    Forward / 503 / 404 when it is not here
    open(handle) -> LocalSession               its Spark session, opened (once)
    commit(command) -> Result                  one Raft write (503 when Raft is not there)
    touch(handle)                              a use: its idle expiry starts again
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Mapping, Optional

from jm.cluster.spark.engines import NoEngine, own_token
from jm.cluster.jobs.envs import EnvBuildError
from jm.cluster.sql.sqlservices import SqlServices
from jm.cluster.sql.sessiondeps import ShippedDeps
from jm.cluster.sql.sqlops import LocalSession
from jm.cluster.spark.sqlworkers import SqlWorkers
from jm.cluster.waits import wait_event
from jm.policy.sql.sessiondeps import SessionDeps, session_deps, spark_settings
from jm.policy.sql.sqlop import OpStatus
from jm.runtime import sqlproto as P
from jm.runtime.sqlclient import SqlWorker
from raft import tenants as T
from raft.commands import CloseSqlSessions
from raft.node import RaftUnavailable
from jm.api import ApiError, Forward, UnknownSession

log = logging.getLogger("jm.sql")

RUNNING = OpStatus.RUNNING


def check_deps(props: Mapping[str, str]) -> SessionDeps:
    """A session's dependencies; 400 naming each dependency property that is wrong
    (jm/policy/sql/sessiondeps.py)."""
    try:
        return session_deps(props)
    except ValueError as exc:
        raise ApiError(400, *exc.args[0])


class SessionHost:
    def __init__(self, svc: SqlServices) -> None:
        self.svc = svc
        self.node, self.conf, self.raft = svc.node, svc.conf, svc.raft
        self.local: dict[str, LocalSession] = {}
        # one SQL worker per engine with SQL on it (jm/cluster/spark/sqlworkers.py)
        self.workers = SqlWorkers(svc.conf, svc.log_dir, svc.guard, svc.child_env)
        self._task: Optional[asyncio.Task] = None
        self._wake: Optional[asyncio.Event] = None
        # idle expiry counts on this host's monotonic clock, from the last request this
        # peer served (never from a time another peer stamped), so a wall clock step does
        # not close sessions early or keep them late; time.time() only stamps commands
        self.clock = time.monotonic

    def start(self) -> None:
        self._wake = self.raft.subscribe()
        self._task = asyncio.create_task(self._loop())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=5)
        for s in self.local.values():
            for op in s.ops.values():
                if op.task is not None:
                    op.task.cancel()
        for s in list(self.local.values()):
            self._release_engine(s)
        await self.workers.close()

    def has_spark(self) -> None:
        if not self.svc.engines.available:
            raise ApiError(503, "this peer has no Spark Connect server (spark.connect.embedded "
                                "is false and spark.remote is unset)")

    async def _engine(self, s: LocalSession):
        """The session's engine (its tenant's at share-level tenant), acquired once."""
        if s.engine is None:
            self.has_spark()
            with self.raft.read() as st:
                rec = st.sessions.get(s.handle)
                tenant = rec.tenant if rec is not None else None
                runtime = T.runtime(st, tenant)
            engines = self.svc.engines
            key = engines.key_for(tenant)
            try:
                engine = await engines.acquire(key, self._holder(s),
                                               self.conf.spark.startup_timeout,
                                               runtime)
            except NoEngine as exc:
                raise ApiError(503, str(exc), headers={"Retry-After": "5"})
            if self.local.get(s.handle) is not s:  # let go while it waited
                engines.release(key, self._holder(s))
                raise ApiError(404, f"session {s.handle} does not exist")
            s.engine, s.engine_key, s.user = engine, key, runtime.os_user
            s.bounds = (runtime.memory, runtime.cpu)
        return s.engine

    @staticmethod
    def _holder(s: LocalSession) -> str:
        return f"sql:{s.handle}:{s.epoch}"

    def _release_engine(self, s: LocalSession) -> None:
        if s.engine_key is not None:
            self.svc.engines.release(s.engine_key, self._holder(s))
            s.engine = s.engine_key = None

    async def _loop(self) -> None:
        """Follow the replicated sessions (new ones here are opened ahead of their first
        statement; moved or closed ones are let go) and expire idle ones."""
        while True:
            await wait_event(self._wake, 2.0)
            self._wake.clear()
            try:
                await self._reconcile()
            except Exception:
                log.exception("SQL sessions reconcile failed")

    async def _reconcile(self) -> None:
        now = self.clock()
        with self.raft.read() as st:
            mine = {h: s.epoch for h, s in st.sessions.items() if s.node == self.node}
            livy = {h for h in mine if st.sessions[h].livy is not None}
        for handle, s in list(self.local.items()):
            if mine.get(handle) != s.epoch:
                self._drop_local(handle, release=handle not in mine)
        for handle, epoch in mine.items():
            if handle not in self.local:
                self.local[handle] = LocalSession(handle, epoch, now)
                if self.svc.lease_valid() and self.svc.engines.available:
                    asyncio.ensure_future(self._open_quietly(handle))
        idle = self.conf["sql-gateway.session.idle-timeout"]
        livy_idle = self.conf["sql-gateway.livy-session.idle-timeout"]
        expired = tuple(h for h, s in self.local.items()
                        if now - s.last_access > (livy_idle if h in livy else idle)
                        and not any(op.status == RUNNING for op in s.ops.values()))
        if expired and self.svc.lease_valid():
            log.info("closing %d idle SQL session(s)", len(expired))
            await self.commit(CloseSqlSessions(expired, time.time(), "idle"))

    def _drop_local(self, handle: str, release: bool) -> None:
        s = self.local.pop(handle, None)
        if s is None:
            return
        for op in s.ops.values():
            if op.task is not None and not op.task.done():
                op.task.cancel()
        if s.worker is not None and s.worker.alive and s.generation:
            asyncio.ensure_future(self.quiet(s.worker, P.CloseSession(handle, release)))
        self._release_engine(s)
        if self.svc.deps is not None:
            self.svc.deps.release(handle)

    async def shipped(self, handle: str, props: Mapping[str, str], user: Optional[str]
                      ) -> ShippedDeps:
        """Session `handle`'s dependencies (its properties name them) for a process of this
        peer running as `user`: fetched, handed over, its environment built. An ApiError
        (400) naming what could not be had."""
        deps = check_deps(props)  # (checked at its opening too: by an older build?)
        if not deps or self.svc.deps is None:
            return ShippedDeps()
        try:
            return await self.svc.deps.prepare(handle, deps, user)
        except EnvBuildError as exc:
            raise ApiError(400, f"RequirementsError: the session's spark.jm.requirements "
                                f"could not be installed: {exc}")
        except (LookupError, OSError) as exc:
            raise ApiError(400, f"the session's files could not be had on this peer: "
                                f"{type(exc).__name__}: {exc}")

    @staticmethod
    async def quiet(worker: Any, message: Any) -> None:
        try:
            await worker.call(message, timeout=30)
        except Exception:
            pass

    async def _open_quietly(self, handle: str) -> None:
        try:
            await self.open(handle)
        except Exception as exc:
            log.warning("opening SQL session %s ahead of use failed: %s", handle, exc)

    async def open(self, handle: str) -> LocalSession:
        """Session `handle`'s Spark session, opened here (once; again after its worker or
        engine restarted)."""
        s = self.local.get(handle)
        if s is None:
            raise ApiError(404, f"session {handle} does not exist")
        engine = await self._engine(s)
        # (a tenant's engine's worker runs as the tenant's user; the peer engine's is shared)
        own = bool(s.engine_key.owner)  # a tenant's engine (not the peer's): its own
        worker = s.worker = self.workers.get(engine.url, s.engine_key.name,
                                             s.user if own else None,
                                             own_token(s.engine_key, engine),
                                             *(s.bounds if own else (0, 0)))
        # (an engine's restart loses its sessions: they are rebuilt)
        if (s.generation and s.generation == worker.generation and worker.alive
                and s.server == engine.generation):
            return s
        if s.opening is None or s.opening.done():
            s.opening = asyncio.ensure_future(self._open(s, worker, s.user if own else None))
        await asyncio.shield(s.opening)
        return s

    async def _open(self, s: LocalSession, worker: SqlWorker, user: Optional[str]) -> None:
        server = s.engine.generation
        if s.generation == worker.generation and worker.alive:  # open in a lost server
            await worker.call(P.CloseSession(s.handle, release=False))
        with self.raft.read() as st:
            rec = st.sessions.get(s.handle)
            if rec is None:
                raise ApiError(404, f"session {s.handle} does not exist")
            props, replay = dict(rec.properties), tuple(rec.statements)
        shipped = await self.shipped(s.handle, props, user)
        res = await worker.call(P.OpenSession(s.handle, spark_settings(props), replay,
                                              shipped.artifacts, shipped.python))
        s.generation, s.server = worker.generation, server
        if res.get("errors"):
            log.warning("SQL session %s rebuilt with errors: %s", s.handle, res["errors"])

    async def commit(self, command: Any) -> Any:
        """One Raft write; 503 (retry) when Raft cannot take it now."""
        try:
            res = await self.raft.submit(command, self.conf["rest.write-timeout"])
        except RaftUnavailable as exc:
            raise ApiError(503, str(exc), headers={"Retry-After": "1"})
        return res

    # ---- where a session is -----------------------------------------------------------
    def record(self, handle: str):
        """(its replicated record, its holder's URL); UnknownSession (404) if none."""
        with self.raft.read() as st:
            rec = st.sessions.get(handle)
            if rec is None:
                raise UnknownSession(404, f"session {handle} does not exist (closed, expired or "
                                     "never opened)")
            peer = st.peers.get(rec.node) if rec.node else None
            return rec, (self.svc.url_of(peer.host, peer.rest_port) if peer else None)

    def held(self, handle: str, forwarded: bool) -> LocalSession:
        """The session, held here: Forward to its holder (503 while it moves, or when
        the request was forwarded already)."""
        rec, url = self.record(handle)
        if rec.node != self.node:
            if url is None or forwarded:
                raise ApiError(503, f"session {handle} is moving to another peer; retry",
                               headers={"Retry-After": "1"})
            raise Forward(url)
        s = self.local.get(handle)
        if s is None or s.epoch != rec.epoch:  # applied here, not reconciled yet
            s = self.local[handle] = LocalSession(handle, rec.epoch, self.clock())
        s.last_access = self.clock()
        return s

    def touch(self, handle: str) -> None:
        """A use of the session (a statement running long): its idle time starts again."""
        s = self.local.get(handle)
        if s is not None:
            s.last_access = self.clock()
