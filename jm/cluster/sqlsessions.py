"""The SQL gateway's sessions on a peer (Flink SQL Gateway's REST API, rest/sql.py):
placed on peers like jobs, each a Spark Connect session in its peer's SQL worker.

What is replicated (raft/sessions.py): which peer holds each session and the
statements that define its state (SET, USE, temporary views...), so that another peer
can rebuild it. A request for a session held by another peer raises `Forward` with that
peer's URL (rest/sql.py proxies it); a session unknown to the replicated state is a 404.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any, Mapping, Optional

from jm.cluster.batcher import Batcher
from jm.cluster.services import SqlServices
from jm.cluster.engines import NoEngine, own_token
from jm.cluster.envs import EnvBuildError
from jm.cluster.sessiondeps import ShippedDeps
from jm.cluster.sqlops import LocalSession
from jm.cluster.sqlworkers import SqlWorkers
from jm.cluster.tenancy import tenant_for
from jm.cluster.waits import wait_event
from jm.policy.sessiondeps import SessionDeps, session_deps, spark_settings
from jm.policy.sqlop import OpStatus
from jm.runtime import sqlproto as P
from jm.runtime.sqlclient import SqlWorker
from raft import sessions as S, tenants as T
from raft.commands import CloseSqlSessions, OpenSqlSession, StartSqlOperations
from raft.node import RaftUnavailable
from jm.api import ANYONE, ApiError, Credential, Forward, SessionInfo, UnknownSession

log = logging.getLogger("jm.sql")

RUNNING, CLOSED = OpStatus.RUNNING, OpStatus.CLOSED
MAX_PROPERTIES_SIZE = 64 * 1024  # bytes of a session's name and properties


def check_deps(props: Mapping[str, str]) -> SessionDeps:
    """A session's dependencies; 400 naming each dependency property that is wrong
    (jm/policy/sessiondeps.py)."""
    try:
        return session_deps(props)
    except ValueError as exc:
        raise ApiError(400, *exc.args[0])


def check_properties_size(props: Mapping[str, str], *names: str) -> None:
    """413 when a session's properties and names (its name, a Livy proxyUser) are more
    than MAX_PROPERTIES_SIZE bytes: they are kept in the replicated state and sent to
    each holder."""
    size = sum(len(k.encode("utf-8", "replace")) + len(v.encode("utf-8", "replace"))
               for k, v in props.items()) + sum(len(n.encode("utf-8", "replace"))
                                                for n in names)
    if size > MAX_PROPERTIES_SIZE:
        raise ApiError(413, f"the session's name and properties are {size} bytes, more "
                            f"than {MAX_PROPERTIES_SIZE}")


class SqlSessions:
    """The sessions of the SQL gateway on this peer: opened, placed, moved and expired
    (the operations on them are in jm/cluster/sqlgateway.py)."""

    def __init__(self, svc: SqlServices) -> None:
        self.svc = svc
        self.node, self.conf, self.raft = svc.node, svc.conf, svc.raft
        self.local: dict[str, LocalSession] = {}
        # one SQL worker per engine with SQL on it (jm/cluster/sqlworkers.py)
        self.workers = SqlWorkers(svc.conf, svc.log_dir, svc.guard, svc.child_env)
        self._task: Optional[asyncio.Task] = None
        self._wake: Optional[asyncio.Event] = None
        self.ops_log: Optional[Batcher] = None  # operations, for the session's next holder
        self.flink_ok: set[str] = set()  # operations answered as Flink's SET/RESET (OK)
        self.functions: Optional[tuple] = None  # Spark's function names, for completion
        # idle expiry counts on this host's monotonic clock, from the last request this
        # peer served (never from a time another peer stamped), so a wall clock step does
        # not close sessions early or keep them late; time.time() only stamps commands
        self.clock = time.monotonic

    # ---- lifecycle --------------------------------------------------------------------
    def start(self) -> None:
        self._wake = self.raft.subscribe()
        self._task = asyncio.create_task(self._loop())
        self.ops_log = Batcher(self.raft, StartSqlOperations,
                               self.conf["rest.write-timeout"], retry=False)
        self.ops_log.start()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=5)
        if self.ops_log is not None:
            await self.ops_log.close()
        for s in self.local.values():
            for op in s.ops.values():
                if op.task is not None:
                    op.task.cancel()
        for s in list(self.local.values()):
            self._release_engine(s)
        await self.workers.close()

    def _has_spark(self) -> None:
        if not self.svc.engines.available:
            raise ApiError(503, "this peer has no Spark Connect server (spark.connect.embedded "
                                "is false and spark.remote is unset)")

    async def _engine(self, s: LocalSession):
        """The session's engine (its tenant's at share-level tenant), acquired once."""
        if s.engine is None:
            self._has_spark()
            with self.raft.read() as st:
                rec = st.sessions.get(s.handle)
                tenant = rec.tenant if rec is not None else None
                runtime = T.runtime(st, tenant)
            engines = self.svc.engines
            key = engines.key_for(tenant)
            try:
                engine = await engines.acquire(key, self._holder(s),
                                               self.conf["spark.connect.startup-timeout"],
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
            await self._commit(CloseSqlSessions(expired, time.time(), "idle"))

    def _drop_local(self, handle: str, release: bool) -> None:
        s = self.local.pop(handle, None)
        if s is None:
            return
        for op in s.ops.values():
            if op.task is not None and not op.task.done():
                op.task.cancel()
        if s.worker is not None and s.worker.alive and s.generation:
            asyncio.ensure_future(self._quiet(s.worker, P.CloseSession(handle, release)))
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
    async def _quiet(worker: Any, message: Any) -> None:
        try:
            await worker.call(message, timeout=30)
        except Exception:
            pass

    async def _open_quietly(self, handle: str) -> None:
        try:
            await self._ensure_open(handle)
        except Exception as exc:
            log.warning("opening SQL session %s ahead of use failed: %s", handle, exc)

    async def _ensure_open(self, handle: str) -> LocalSession:
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

    async def _commit(self, command: Any) -> Any:
        try:
            res = await self.raft.submit(command, self.conf["rest.write-timeout"])
        except RaftUnavailable as exc:
            raise ApiError(503, str(exc), headers={"Retry-After": "1"})
        return res

    # ---- where a session is -----------------------------------------------------------
    def _record(self, handle: str):
        with self.raft.read() as st:
            rec = st.sessions.get(handle)
            if rec is None:
                raise UnknownSession(404, f"session {handle} does not exist (closed, expired or "
                                    "never opened)")
            peer = st.peers.get(rec.node) if rec.node else None
            return rec, (self.svc.url_of(peer.host, peer.rest_port) if peer else None)

    def _held_here(self, handle: str, forwarded: bool) -> LocalSession:
        rec, url = self._record(handle)
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

    def move_wait(self) -> float:
        """A dead holder's sessions move `heartbeat.timeout` after its last heartbeat (a
        new leader may take a Raft election more): wait that long and a little more."""
        return min(self.conf["heartbeat.timeout"] + 2.0, 10.0)

    async def catch_up(self) -> None:
        """Until this replica has applied everything committed before now (one Raft
        barrier): a session opened through another peer an instant ago is known here."""
        try:
            await self.raft.barrier(self.conf["rest.write-timeout"])
        except RaftUnavailable as exc:
            raise ApiError(503, str(exc), headers={"Retry-After": "1"})

    def proxy_read_timeout(self) -> float:
        """How long a request proxied to a session's holder may go without an answer: a
        holder's longest wait (a fetch waiting for rows, a statement being recorded in
        Raft) and a heartbeat timeout more. A frozen holder does not hold the request
        for longer; the request then waits for the session to move (rest/sql.py)."""
        return (self.conf["sql-gateway.fetch-wait"] + self.conf["rest.write-timeout"]
                + self.conf["heartbeat.timeout"])

    async def wait_moved(self, handle: str, holder_url: str, deadline: float) -> bool:
        loop = asyncio.get_running_loop()
        while True:
            try:
                _, url = self._record(handle)
            except ApiError:
                return True  # closed meanwhile: the request's answer is a 404 now
            if url != holder_url:
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.05)

    # ---- sessions -----------------------------------------------------------------------
    async def open_session(self, body: dict, who: Credential = ANYONE) -> dict:
        props = body.get("properties") or {}
        name = body.get("sessionName") or ""
        if not isinstance(props, dict) or not all(isinstance(k, str) for k in props):
            raise ApiError(400, "properties must be an object of string keys")
        if not isinstance(name, str):
            raise ApiError(400, "sessionName must be a string")
        props = {k: str(v) for k, v in props.items()}
        check_properties_size(props, name)
        check_deps(props)
        tenant = tenant_for(who, None)
        handle, node, limit = str(uuid.uuid4()), *self.place()
        await self.open_checked(OpenSqlSession(handle, name, props, node, time.time(), limit,
                                               tenant, who.name))
        return handle

    def place(self) -> tuple[str, int]:
        """(the peer a new session goes to, sql-gateway.max-sessions): the ready peer
        holding the fewest sessions (this one on a tie); 503 if every one is full."""
        limit = self.conf["sql-gateway.max-sessions"]
        with self.raft.read() as st:
            counts = S.session_counts(st)
            ready = {p.id for p in st.alive_peers() if not p.draining and p.ready}
        room = [n for n in counts if n in ready and (limit <= 0 or counts[n] < limit)]
        if not room:
            raise ApiError(503, "every peer holds sql-gateway.max-sessions sessions (or none "
                                "is ready); retry later", headers={"Retry-After": "2"})
        return min(room, key=lambda n: (counts[n], n != self.node, n)), limit

    async def open_checked(self, command: Any) -> Any:
        """Commit a session's opening: its result's value, or the ApiError."""
        res = await self._commit(command)
        if not res.ok and res.code == "quota":  # (the tenant's: until one of its closes)
            raise ApiError(429, res.error, headers={"Retry-After": "10"})
        if not res.ok and res.code == "protocol":  # (an older peer's build: until upgraded)
            raise ApiError(409, res.error)
        if not res.ok:
            raise ApiError(503 if res.code in ("full", "unavailable") else 400, res.error,
                           headers={"Retry-After": "1"})
        return res.value

    def session_info(self, handle: str) -> SessionInfo:
        rec, url = self._record(handle)
        return SessionInfo(dict(rec.properties), rec.name, rec.node, url, len(rec.statements),
                           rec.moves)

    async def heartbeat(self, handle: str, forwarded: bool) -> None:
        self._held_here(handle, forwarded)

    async def close_session(self, handle: str) -> str:
        self._record(handle)
        res = await self._commit(CloseSqlSessions((handle,), time.time(), "closed"))
        if not res.ok:
            raise ApiError(400, res.error)
        return CLOSED.value
