"""The peer's Spark Connect endpoint (spark.connect.endpoint.*): an authenticated gRPC
front that passes each Connect session to an engine of this peer (its tenant's where
engines are per tenant), so that `SparkSession.builder.remote("sc://peer:15002/;token=...")`
works from any host with the cluster's credentials.

Its gRPC server and port are jm/cluster/spark/connectlisten.py's. This is the thin
driver of jm/policy/spark/connectbook.py: a request is checked before any Spark
code sees it (the caller's token: UNAUTHENTICATED; its role: PERMISSION_DENIED; the
session's owner), a new session is recorded in Raft (the tenant's session quota:
RESOURCE_EXHAUSTED) and given its engine, and then the request's bytes go to the engine
unchanged with the engine's own token; answers and errors (with Spark's details) come
back as they are. Idle sessions are released in Spark and closed.
"""
from __future__ import annotations

import asyncio
import hmac
import logging
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Awaitable, Callable, Optional

import grpc

from jm.api import ANYONE, ROOT, Credential
from jm.cluster.spark.connectlisten import MAX_MESSAGE
from jm.cluster.spark.engines import NoEngine
from jm.policy.spark import connectbook as B
from jm.policy.spark.connectwire import (METHODS, Method, NotARequest, SessionRef,
                                         release_request, session_of)
from raft.commands import CloseConnectSessions, OpenConnectSession
from raft.node import RaftUnavailable
from raft.outcomes import ProtocolRefused
from raft import tenants as T

log = logging.getLogger("jm.connect")

# client metadata not passed on to the engine (gRPC's own, and the caller's token)
DROPPED = ("authorization", "user-agent", "content-type", "te")
RELEASE_TIMEOUT = 5.0  # s: a ReleaseSession sent to an engine for an idle session


@dataclass(frozen=True)
class FrontSettings:
    node: str
    root_token: Optional[str]      # rest.auth.token (None: the cluster has no credentials)
    idle_timeout: float            # sql-gateway.session.idle-timeout
    max_sessions: int              # spark.connect.endpoint.max-sessions (0: no limit)
    engine_wait: float             # spark.connect.startup-timeout
    write_timeout: float           # rest.write-timeout


@dataclass
class _Served:
    """A session's engine: its key, the server and the holder name it was acquired by."""
    key: Any
    server: Any
    holder: str
    user_id: str


class ConnectFront:
    def __init__(self, settings: FrontSettings, raft: Any, engines: Any,
                 credential: Callable[[str], Awaitable[Optional[Credential]]],
                 lease_valid: Callable[[], bool],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.s, self.raft, self.engines = settings, raft, engines
        self.credential, self.lease_valid, self.clock = credential, lease_valid, clock
        self.book = B.ConnectBook()
        self.opening: dict[str, asyncio.Future] = {}
        self.served: dict[str, _Served] = {}
        self.channels: dict[str, grpc.aio.Channel] = {}
        self._tasks: set[asyncio.Task] = set()
        self._ticker: Optional[asyncio.Task] = None

    def start(self) -> None:
        self._ticker = asyncio.create_task(self._tick())

    async def close(self) -> None:
        if self._ticker is not None:
            self._ticker.cancel()
        await self._perform(self.book.close_all("its peer stopped"))
        for ch in self.channels.values():
            await ch.close()
        self.channels.clear()

    # ---- the three kinds of call --------------------------------------------------------
    async def unary(self, method: Method, request: bytes, context) -> bytes:
        ref = await self._ref(request, context)
        served = await self._admit(ref, context)
        try:
            call = self._channel(served).unary_unary(method.path)(
                request, metadata=self._metadata(context, served),
                timeout=context.time_remaining())
            answer = await call
        except grpc.aio.AioRpcError as exc:
            await _abort_as(context, exc)
        finally:
            self._done(ref.session_id)
        if method.name == "ReleaseSession":
            await self._perform(self.book.handle(B.Released(ref.session_id), self.clock()))
        return answer

    async def server_stream(self, method: Method, request: bytes,
                            context) -> AsyncIterator[bytes]:
        ref = await self._ref(request, context)
        served = await self._admit(ref, context)
        call = self._channel(served).unary_stream(method.path)(
            request, metadata=self._metadata(context, served),
            timeout=context.time_remaining())
        try:
            async for answer in call:
                yield answer
        except grpc.aio.AioRpcError as exc:
            await _abort_as(context, exc)
        finally:
            call.cancel()  # (the client went away: so does the engine's call)
            self._done(ref.session_id)

    async def client_stream(self, method: Method, requests: AsyncIterator[bytes],
                            context) -> bytes:
        it = requests.__aiter__()
        try:
            first = await it.__anext__()
        except StopAsyncIteration:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "an empty stream")
        ref = await self._ref(first, context)
        served = await self._admit(ref, context)

        async def all_of() -> AsyncIterator[bytes]:
            yield first
            async for request in it:
                yield request
        try:
            return await self._channel(served).stream_unary(method.path)(
                all_of(), metadata=self._metadata(context, served),
                timeout=context.time_remaining())
        except grpc.aio.AioRpcError as exc:
            await _abort_as(context, exc)
        finally:
            self._done(ref.session_id)

    # ---- before Spark ---------------------------------------------------------------------
    async def _ref(self, request: bytes, context) -> SessionRef:
        try:
            ref = session_of(request)
        except NotARequest as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                f"not a Spark Connect request: {exc}")
        if ref is None:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT,
                                "the request names no session_id")
        return ref

    async def _who(self, context) -> Optional[Credential]:
        if not self.s.root_token:
            return ANYONE
        bearer = ""
        for key, value in context.invocation_metadata() or ():
            if key == "authorization" and isinstance(value, str):
                scheme, _, given = value.partition(" ")
                bearer = given.strip() if scheme.lower() == "bearer" else ""
        if not bearer:
            return None
        if hmac.compare_digest(bearer.encode("utf-8", "surrogateescape"),
                               self.s.root_token.encode()):
            return ROOT
        try:
            return await self.credential(bearer)
        except Exception as exc:
            if getattr(exc, "bearer_refused", False):  # a JWT that is none: why
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
            raise

    async def _admit(self, ref: SessionRef, context) -> _Served:
        """The session's engine once the caller may use it (opened if new); the call
        is aborted with the refusal's status otherwise."""
        who = await self._who(context)
        refusal = B.admission(who)
        if refusal is not None:
            await _refuse(context, refusal)
        while True:
            [step] = self.book.handle(B.Call(ref.session_id, who, ref.user_id), self.clock())
            if isinstance(step, B.Forward):
                return self.served[ref.session_id]
            if isinstance(step, B.Refuse):
                await _refuse(context, step)
            if isinstance(step, B.Open):
                fut = self.opening[step.session_id] = asyncio.get_running_loop().create_future()
                task = asyncio.create_task(self._open(step, fut))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            # (Open or Wait: the opening under way answers, then the book is asked again)
            refused = await asyncio.shield(self.opening[ref.session_id])
            if refused is not None:
                await _refuse(context, refused)

    async def _open(self, step: B.Open, fut: asyncio.Future) -> None:
        refusal = None
        try:
            refusal = await self._open_session(step)
        except Exception as exc:  # (whatever it was, the waiting calls hear of it)
            log.exception("opening Connect session %s", step.session_id)
            refusal = B.Refuse(B.Code.UNAVAILABLE, f"the session could not be opened: {exc}")
        finally:
            self.book.handle(B.Opened(step.session_id, refusal), self.clock())
            self.opening.pop(step.session_id, None)
            if not fut.done():
                fut.set_result(refusal)

    async def _open_session(self, step: B.Open) -> Optional[B.Refuse]:
        if not self.lease_valid():
            return B.Refuse(B.Code.UNAVAILABLE, f"peer {self.s.node} has lost touch with the "
                            "cluster's leader; connect to another peer")
        if not self.engines.available:
            return B.Refuse(B.Code.UNAVAILABLE, f"peer {self.s.node} has no Spark")
        cmd = OpenConnectSession(step.session_id, self.s.node, time.time(), step.tenant,
                                 step.submitter, step.user_id, self.s.max_sessions)
        try:
            res = await self.raft.submit(cmd, self.s.write_timeout)
        except RaftUnavailable as exc:
            return B.Refuse(B.Code.UNAVAILABLE, str(exc))
        except ProtocolRefused as exc:  # (a peer of an older build is still in the cluster)
            return B.Refuse(B.Code.FAILED_PRECONDITION, str(exc))
        if not res.ok:
            code = {"quota": B.Code.RESOURCE_EXHAUSTED, "full": B.Code.RESOURCE_EXHAUSTED,
                    "exists": B.Code.PERMISSION_DENIED, "invalid": B.Code.INVALID_ARGUMENT,
                    "protocol": B.Code.FAILED_PRECONDITION}.get(res.code, B.Code.UNAVAILABLE)
            return B.Refuse(code, res.error or "the session could not be recorded")
        with self.raft.read() as st:
            runtime = T.runtime(st, step.tenant)
        key, holder = self.engines.key_for(step.tenant), f"connect:{step.session_id}"
        try:
            server = await self.engines.acquire(key, holder, self.s.engine_wait, runtime)
        except NoEngine as exc:
            await self._commit_close([step.session_id], "no engine")
            return B.Refuse(B.Code.UNAVAILABLE, str(exc))
        ready = getattr(server, "ready", None)
        if ready is not None and not ready.is_set():
            try:
                await asyncio.wait_for(ready.wait(), self.s.engine_wait)
            except asyncio.TimeoutError:
                self.engines.release(key, holder)
                await self._commit_close([step.session_id], "engine not ready")
                return B.Refuse(B.Code.UNAVAILABLE, f"the Spark engine of peer {self.s.node} "
                                f"is not ready after {self.s.engine_wait:.0f} s")
        self.served[step.session_id] = _Served(key, server, holder, step.user_id)
        return None

    # ---- to the engine ----------------------------------------------------------------
    def _channel(self, served: _Served) -> grpc.aio.Channel:
        target = _target(served.server.url)
        ch = self.channels.get(target)
        if ch is None:
            ch = self.channels[target] = grpc.aio.insecure_channel(target, options=[
                ("grpc.max_receive_message_length", MAX_MESSAGE),
                ("grpc.max_send_message_length", MAX_MESSAGE)])
        return ch

    @staticmethod
    def _metadata(context, served: _Served) -> tuple:
        md = [(k, v) for k, v in (context.invocation_metadata() or ())
              if k not in DROPPED and not k.startswith(("grpc-", ":"))]
        token = getattr(served.server, "token", None)
        if token:
            md.append(("authorization", f"Bearer {token}"))
        return tuple(md)

    def _done(self, session_id: str) -> None:
        self.book.handle(B.CallDone(session_id), self.clock())

    # ---- closing ------------------------------------------------------------------------
    async def _tick(self) -> None:
        every = max(1.0, min(30.0, self.s.idle_timeout / 4))
        while True:
            await asyncio.sleep(every)  # a timer: the sessions' idle timeout
            try:
                await self._perform(self.book.handle(B.Tick(self.s.idle_timeout),
                                                     self.clock()))
            except Exception:
                log.exception("closing idle Connect sessions")

    async def _perform(self, instructions: list) -> None:
        """Close what the book closes: released in Spark (at once, each within
        RELEASE_TIMEOUT), their engines let go, and the closes committed together."""
        closes = [ins for ins in instructions if isinstance(ins, B.Close)]
        served = {c.session_id: self.served.pop(c.session_id, None) for c in closes}
        await asyncio.gather(*(self._release_in_spark(c.session_id, served[c.session_id])
                               for c in closes
                               if c.in_spark and served[c.session_id] is not None))
        for c in closes:
            s = served[c.session_id]
            if s is not None:
                self.engines.release(s.key, s.holder)
            log.info("Connect session %s closed (%s)", c.session_id, c.reason)
        if closes:
            await self._commit_close([c.session_id for c in closes], closes[0].reason)

    async def _release_in_spark(self, session_id: str, served: _Served) -> None:
        token = getattr(served.server, "token", None)
        md = (("authorization", f"Bearer {token}"),) if token else ()
        try:
            await self._channel(served).unary_unary(METHODS["ReleaseSession"].path)(
                release_request(session_id, served.user_id), metadata=md,
                timeout=RELEASE_TIMEOUT)
        except grpc.aio.AioRpcError as exc:  # (its engine restarted: gone already)
            log.info("releasing Connect session %s in Spark: %s", session_id, exc.details())

    async def _commit_close(self, session_ids: list, reason: str) -> None:
        try:
            await self.raft.submit(CloseConnectSessions(tuple(session_ids), self.s.node,
                                                        time.time(), reason),
                                   self.s.write_timeout)
        except (RaftUnavailable, ProtocolRefused) as exc:  # (dropped when this peer dies
            log.warning("recording the close of Connect sessions: %s", exc)  # or restarts)


def _target(url: str) -> str:
    """host:port of an engine's sc:// URL."""
    rest = url.split("://", 1)[-1]
    return rest.split("/", 1)[0]


async def _refuse(context, refusal: B.Refuse) -> None:
    await context.abort(getattr(grpc.StatusCode, refusal.code.value), refusal.message)


async def _abort_as(context, exc: grpc.aio.AioRpcError) -> None:
    """The engine's error, as it was: its status, message and details (Spark's error
    class travels in the trailing metadata)."""
    trailing = tuple((k, v) for k, v in (exc.trailing_metadata() or ())
                     if not k.startswith(":"))
    await context.abort(exc.code(), exc.details() or "", trailing)
