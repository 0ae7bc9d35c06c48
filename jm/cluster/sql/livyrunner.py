"""The Livy sessions this peer holds (jm/cluster/sql/livysessions.py): their statements run
here, one at a time and in order, each ended in the replicated state with its output.

* `sql` statements run through the SQL gateway in the session's Spark session, with a
  request id made from the statement's number: after a failover the next holder runs the
  same operation, so a read runs again and a write is answered from the session's record
  (jm/policy/sql/sqlop.py), never run twice.
* `pyspark` statements run in the session's Python process (jm/runtime/livyclient.py),
  whose `spark` is the same Spark session. What they change in it (SET, temporary views)
  is recorded for the session's next holder. A Python statement that was running when
  its peer died is not run again: its output says so. The first statement of a new
  Python process says that the Python variables of earlier statements were lost.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import replace
from typing import Optional

from jm.cluster.spark.engines import own_token
from jm.cluster.sql.sqlservices import SqlServices
from jm.cluster.sql.sessionhost import SessionHost
from jm.cluster.sql.sqlstatements import Cancelled, Failed, Rows, SqlStatements
from jm.cluster.waits import wait_event
from jm.policy.jobs.runparams import TOKEN_ENV
from jm.runtime.confine import TENANT_CPU, TENANT_MEMORY
from jm.runtime.limits import from_conf as job_limits
from jm.runtime.sqlclient import StatementError, WorkerLost
from jm.wire import livysessions as W
from raft import livy as L, tenants as T
from raft.livy import StatementState
from raft.commands import AddSqlStatement, EndLivyStatement
from raft.node import RaftUnavailable
from jm.api import ApiError

log = logging.getLogger("jm.livy")

TOUCH_EVERY = 10.0   # s: a running statement keeps its session from expiring
RETRY = 1.0          # s: before a statement's end is recorded again (Raft unavailable)
KILL_AFTER = 10.0    # s: a statement past its timeout that an interrupt did not end
AVAILABLE, CANCELLED = StatementState.AVAILABLE, StatementState.CANCELLED
GONE = object()      # _next: the session is not held here at this epoch any more
LOST_PROCESS = ("note: this session's Python process started again on peer {node}: the "
                "peer that held the session died, or the process exited. Python variables "
                "of earlier statements were lost; temporary views and Spark settings were "
                "restored.")


class LocalLivy:
    """A Livy session held here at `epoch`: its runner task and Python process."""
    def __init__(self, number: int, handle: str, epoch: int) -> None:
        self.number, self.handle, self.epoch = number, handle, epoch
        self.task: Optional[asyncio.Task] = None
        self.repl = None                      # jm.runtime.livyclient.LivyProcess
        self.running: Optional[int] = None    # the statement running
        self.request: Optional[str] = None    # its request id, for a SQL statement
        self.cancel_asked: set[int] = set()
        self.wake = asyncio.Event()


class LivyRunner:
    def __init__(self, svc: SqlServices, host: SessionHost, statements: SqlStatements
                 ) -> None:
        self.svc, self.host, self.statements = svc, host, statements
        self.raft, self.node = svc.raft, svc.node
        self.local: dict[int, LocalLivy] = {}
        self._task: Optional[asyncio.Task] = None
        self._wake: Optional[asyncio.Event] = None

    def start(self) -> None:
        self._wake = self.raft.subscribe()
        self._task = asyncio.create_task(self._loop())

    async def close(self) -> None:
        tasks = [t for t in (self._task, *(lv.task for lv in self.local.values())) if t]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=5)
        for lv in self.local.values():
            if lv.repl is not None:
                await lv.repl.close()

    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def cancelling(self, number: int) -> set:
        lv = self.local.get(number)
        return {lv.running} & lv.cancel_asked if lv is not None else set()

    async def cancel(self, number: int, statement: int) -> bool:
        """True if `statement` is running here (it is being stopped); otherwise it will
        not start here (the caller records it cancelled)."""
        lv = self.local.get(number)
        if lv is None:
            return False
        lv.cancel_asked.add(statement)
        if lv.running != statement:
            return False
        try:
            if lv.request is not None:
                await self.statements.cancel_run(lv.handle, lv.request)
            elif lv.repl is not None:
                await lv.repl.interrupt(statement)
        except (WorkerLost, StatementError, asyncio.TimeoutError) as exc:
            log.info("Livy statement %d/%d: cancel: %s", number, statement, exc)  # (ending)
        return True

    # ---- following the replicated sessions ---------------------------------------------
    async def _loop(self) -> None:
        while True:
            await wait_event(self._wake, 2.0)
            self._wake.clear()
            try:
                self._reconcile()
            except Exception:
                log.exception("Livy sessions reconcile failed")

    def _reconcile(self) -> None:
        with self.raft.read() as st:
            mine = {n: (h, st.sessions[h].epoch) for n, h in st.livy_ids.items()
                    if h in st.sessions and st.sessions[h].node == self.node}
        for number, lv in list(self.local.items()):
            if mine.get(number) != (lv.handle, lv.epoch):
                self._drop(self.local.pop(number))
        for number, (handle, epoch) in mine.items():
            lv = self.local.get(number)
            if lv is None:
                lv = self.local[number] = LocalLivy(number, handle, epoch)
                lv.task = asyncio.create_task(self._serve(lv))
            lv.wake.set()

    def _drop(self, lv: LocalLivy) -> None:
        if lv.task is not None:
            lv.task.cancel()
        if lv.repl is not None:
            asyncio.ensure_future(lv.repl.close())

    def _next(self, lv: LocalLivy):
        """The session's first statement that has not ended; None if there is none; GONE
        if this peer no longer holds the session at `lv.epoch` (nothing more runs here:
        a statement that ran on would run twice, here and on the next holder)."""
        with self.raft.read() as st:
            s, livy = L.session_of(st, lv.number)
            if livy is None or s.node != self.node or s.epoch != lv.epoch:
                return GONE
            return next((x for x in livy.statements if not x.state), None)

    async def _serve(self, lv: LocalLivy) -> None:
        while True:
            st = self._next(lv)
            if st is GONE:
                return
            if st is None:
                await lv.wake.wait()
                lv.wake.clear()
                continue
            if st.id in lv.cancel_asked:
                await self._end(lv, st.id, CANCELLED, None)
                continue
            lv.running = st.id
            try:
                state, output = await self._run(lv, st)
            except ApiError as exc:  # the session is moving, or this peer lost its lease
                if exc.status != 400:
                    log.info("Livy statement %d/%d not run here: %s", lv.number, st.id, exc)
                    await asyncio.sleep(RETRY)
                    continue
                # (what the session brings cannot be had: its requirements, its files)
                state, output = AVAILABLE, W.error_output(st.id, "SessionError", str(exc))
            except Exception as exc:  # (its Spark session could not be opened...)
                log.exception("Livy statement %d/%d failed", lv.number, st.id)
                state, output = AVAILABLE, W.error_output(st.id, type(exc).__name__,
                                                          str(exc))
            finally:
                lv.running = None
                lv.request = None
            await self._end(lv, st.id, state, output and W.bounded(output))

    async def _end(self, lv: LocalLivy, number: int, state: StatementState,
                   output) -> None:
        """Record a statement's end (again while Raft is unavailable). An output the state
        refuses or that cannot be encoded (a Python int past 64 bits in a %json value)
        gives way once to an error output saying so."""
        substituted = False
        while True:
            try:
                res = await self.raft.submit(EndLivyStatement(
                    lv.number, number, self.node, lv.epoch, state.value, output, time.time()),
                    self.svc.conf.timeouts.commit)
                if res.ok or res.code in ("stale", "not-found"):
                    return
                why = str(res.error)
            except RaftUnavailable as exc:
                log.warning("Livy statement %d/%d: end not recorded yet: %s", lv.number,
                            number, exc)
                await asyncio.sleep(RETRY)
                continue
            except Exception as exc:  # (not encodable)
                why = f"{type(exc).__name__}: {exc}"
            log.warning("Livy statement %d/%d: end not recorded: %s", lv.number, number, why)
            if substituted:
                return
            substituted, state = True, AVAILABLE
            output = W.bounded(W.error_output(number, "OutputRefused",
                                              f"the statement's output could not be kept: {why}"))

    # ---- running one statement ----------------------------------------------------------
    async def _run(self, lv: LocalLivy, st) -> tuple[StatementState, Optional[dict]]:
        if st.kind == "sql":
            return await self._run_sql(lv, st)
        if st.epoch != lv.epoch:
            return AVAILABLE, W.error_output(
                st.id, "SessionMoved", "the peer that ran this statement died before it "
                "ended; it was not run again (it may have run in part). The session goes "
                f"on on peer {self.node}; its Python variables were lost, temporary views "
                "and Spark settings were restored.")
        return await self._run_python(lv, st)

    async def _run_sql(self, lv: LocalLivy, st) -> tuple[StatementState, Optional[dict]]:
        limit = self.svc.conf["sql-gateway.livy-session.statement-timeout"]
        lv.request = f"livy-{lv.number}-{st.id}"
        run = self.statements.run(lv.handle, st.code, lv.request, W.SQL_ROWS)
        try:
            out = await (run if limit is None else asyncio.wait_for(run, limit))
        except asyncio.TimeoutError:  # (its operation was closed: cancelled)
            return AVAILABLE, _timed_out(st.id, limit, killed=False)
        if isinstance(out, Rows):
            return AVAILABLE, W.sql_output(st.id, out.schema, list(out.rows))
        if isinstance(out, Cancelled):
            return CANCELLED, None
        assert isinstance(out, Failed)
        return AVAILABLE, W.error_output(st.id, "SqlError", out.errors[0], out.errors[1:])

    def _touch(self, lv: LocalLivy) -> None:
        self.host.touch(lv.handle)

    async def _run_python(self, lv: LocalLivy, st) -> tuple[StatementState, Optional[dict]]:
        notice = ""
        if lv.repl is None or not lv.repl.alive:
            notice = self._notice(lv, st)
            await self._start_repl(lv)
        run = asyncio.ensure_future(lv.repl.run(st.id, st.code))
        limit = self.svc.conf["sql-gateway.livy-session.statement-timeout"]
        clock = asyncio.get_running_loop().time
        deadline, timed_out = (None if limit is None else clock() + limit), False
        try:
            while not run.done():
                self._touch(lv)
                wait = TOUCH_EVERY if deadline is None else min(TOUCH_EVERY,
                                                                max(0.0, deadline - clock()))
                await asyncio.wait({run}, timeout=wait)
                if run.done() or deadline is None or clock() < deadline:
                    continue
                if not timed_out:  # interrupted (KeyboardInterrupt in its code) ...
                    timed_out, deadline = True, clock() + KILL_AFTER
                    await self._interrupt(lv, st.id)
                else:  # ... or, stuck where no interrupt reaches, its process killed
                    lv.repl.kill()
            res = run.result()
        except WorkerLost as exc:
            if timed_out:
                return AVAILABLE, _timed_out(st.id, limit, killed=True)
            return AVAILABLE, W.error_output(
                st.id, "SessionProcessLost", f"the session's Python process exited ({exc}): "
                "its Python variables were lost; the next statement starts a new one")
        except StatementError as exc:  # its answer could not be encoded (an int past 64 bits)
            return AVAILABLE, W.error_output(
                st.id, "OutputRefused", f"the statement ran, but its output could not be "
                f"sent: {exc}")
        finally:
            run.cancel()
        notes = await self._keep_state(lv, res.state)
        if res.ename == "KeyboardInterrupt" and st.id in lv.cancel_asked:
            return CANCELLED, W.code_output(st.id, res, notice)
        if timed_out and res.ename == "KeyboardInterrupt":
            return AVAILABLE, _timed_out(st.id, limit, killed=False)
        return AVAILABLE, W.code_output(st.id, res, "\n".join(filter(None, (notice, *notes))))

    async def _interrupt(self, lv: LocalLivy, statement: int) -> None:
        try:
            await lv.repl.interrupt(statement)
        except (WorkerLost, StatementError, asyncio.TimeoutError) as exc:
            log.info("Livy statement %d/%d: interrupt: %s", lv.number, statement, exc)

    def _notice(self, lv: LocalLivy, st) -> str:
        with self.raft.read() as state:
            _, livy = L.session_of(state, lv.number)
            earlier = livy is not None and any(
                s.kind == "pyspark" and s.id < st.id for s in livy.statements)
        return LOST_PROCESS.format(node=self.node) if earlier else ""

    def _tenant_runtime(self, lv: LocalLivy) -> T.TenantRuntime:
        """How the session's tenant's work runs: its OS user, memory and CPU."""
        with self.raft.read() as state:
            rec = state.sessions.get(lv.handle)
            return T.runtime(state, rec.tenant) if rec is not None else T.NO_RUNTIME

    def _proxy_user(self, lv: LocalLivy) -> Optional[str]:
        """The OS user the session's Python process runs as (its proxyUser), or None."""
        with self.raft.read() as state:
            _, livy = L.session_of(state, lv.number)
            return livy.proxy_user if livy is not None else None

    async def _start_repl(self, lv: LocalLivy) -> None:
        from jm.runtime.livyclient import LivyProcess
        self.host.held(lv.handle, True)
        # the Spark session (rebuilt if it moved), on the session's engine
        s = await self.host.open(lv.handle)
        conf, svc = self.svc.conf, self.svc
        if lv.repl is not None:
            await lv.repl.close()
        # the user's code runs confined as a job's (rlimits, oom_score_adj), as its proxy
        # user, else its tenant's OS user, else jobmanager.executor.user: never as the
        # peer's user when one of them is set
        proxy = self._proxy_user(lv)
        limits, rt = job_limits(conf), self._tenant_runtime(lv)
        user = proxy or rt.os_user or limits.user
        # in its environment (spark.jm.requirements), its pyFiles on its path
        with self.raft.read() as state:
            rec = state.sessions.get(lv.handle)
            props = dict(rec.properties) if rec is not None else {}
        shipped = await self.host.shipped(lv.handle, props, user)
        lv.repl = LivyProcess(s.engine.url, lv.handle,
                              os.path.join(svc.log_dir, f"livy-session-{lv.number}.log"),
                              conf.executor.nice,
                              on_start=lambda pid: svc.guard(f"livy-session-{lv.number}", pid),
                              env_pass=conf.executor.env_pass,
                              env_add=dict(svc.child_env, **_token_of(s)),
                              pyfiles=shipped.pyfiles)
        lv.repl.user, lv.repl.python = proxy, shipped.python
        # (and within its tenant's memory and CPU: a cgroup of its own)
        lv.repl.confine = dict(replace(limits, user=user).to_dict(),
                               **{TENANT_MEMORY: rt.memory, TENANT_CPU: rt.cpu})

    async def _keep_state(self, lv: LocalLivy, items) -> list:
        """Record what a Python statement changed in its Spark session, for the session's
        next holder; notes for what could not be."""
        notes = []
        for item in items:
            try:
                res = await self.host.commit(AddSqlStatement(lv.handle, self.node, lv.epoch,
                                                             item, time.time()))
                ok, why = res.ok, res.error
            except ApiError as exc:
                ok, why = False, str(exc)
            if not ok:
                notes.append(f"note: not kept if this session moves to another peer "
                             f"({item[:80]}...): {why}")
        return notes


def _token_of(s) -> dict:
    """The environment that opens a session's engine to its Livy process: a tenant's
    engine's own token (the peer engine's is in every child's environment)."""
    token = own_token(s.engine_key, s.engine)
    return {TOKEN_ENV: token} if token else {}


def _timed_out(statement: int, limit: float, killed: bool) -> dict:
    """The output of a statement stopped at sql-gateway.livy-session.statement-timeout."""
    how = ("no interrupt reached it: the session's Python process was stopped (its Python "
           "variables were lost; the next statement starts a new one)") if killed else \
        "it was interrupted"
    return W.error_output(statement, "StatementTimeout", f"the statement ran longer than "
                          f"{limit:g} s (sql-gateway.livy-session.statement-timeout): {how}")
