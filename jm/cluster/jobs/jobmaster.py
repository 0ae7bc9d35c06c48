"""JobMaster: one per job assigned to this peer (one epoch). The driver of the job's
AttemptState (jm/policy/jobs/attempt.py, where every decision is): it runs attempts in job
processes, reports their status with its epoch (fencing token), reads what they leave,
takes savepoints and commits moves, as the state instructs."""
from __future__ import annotations

import asyncio
import logging
import os
import random
import shutil
import signal
import traceback
import uuid
from dataclasses import dataclass, replace
from typing import Any, Awaitable, Optional

from raft import state as S
from raft.commands import CompleteSavepoint, ReleaseJob, StatusReport
from raft.jobspec import JobSpec
from raft.node import RaftUnavailable
from raft.tenants import NO_RUNTIME, TenantRuntime
from jm.cluster.spark.engines import NoEngine, own_token
from jm.cluster.jobs.envs import EnvBuildError
from jm.cluster.jobs.jobengine import JobEngine
from jm.cluster.jobs.jobpython import JobPython
from jm.cluster.jobs.jobservices import JobEnv, next_report_seq
from jm.runtime.executor import ExecutorLost, JobProcess, ProcessExit, Refused
from jm.runtime.sparkapp import SCRATCH
from jm.policy.spark.enginedeath import OomSuspects
from jm.policy.jobs.bounds import bounded_failure, readable, storable, truncate
from jm.policy.jobs.attempt import AttemptState
from jm.policy.jobs.attemptio import (ArmStopTimer, Begin, CleanupSession, Committed, CompleteStop,
                                      DelayElapsed, Done, Exited, FailureRead, IntentsChanged, Kill,
                                      LeaseBack, ReadFailure, ReadResult, Release, Report, Reported,
                                      ResultRead, SavepointTaken, SessionCleaned, Spawn, Spawned,
                                      SpawnFailed, StopTimedOut, TakeSavepoint, WaitFor,
                                      WaitForLease)
from jm.policy.jobs.intents import NONE as NO_INTENTS, Intents
from jm.policy.jobs.runparams import AttemptPlace, RunParams, attempt_params, cleanup_params
from jm.policy.jobs.restart import RestartStrategy
from jm.policy.jobs.submitopts import artifact_refs, with_local_files
from jm.cluster.jobs import remotefs
from jm.cluster.jobs.artifacts import missing_code
from jm.cluster.jobs.jobfiles import StdoutTee, read_failure, read_json, read_result
from jm.cluster.jobs.sparkreports import MAX_INFO_SIZE, ProgressReports, SparkReports
from jm.cluster.jobs.savepoint import (SavepointError, checkpoint_query_ids, new_location,
                                       restore, snapshot, sweep_temporaries)

log = logging.getLogger("jm.cluster.jobmaster")


STOP_WAIT = 5.0  # seconds a stopping JobMaster waits for its cancelled tasks


class JobMaster:
    """The driver of one job's AttemptState (jm/policy/jobs/attempt.py): it turns the job
    process, the replicated state, files and timers into events, one at a time from a
    queue, and performs the instructions the state returns."""

    def __init__(self, env: JobEnv, job_id: str, epoch: int, spec: JobSpec,
                 losses: tuple = (), tenant: Optional[str] = None,
                 runtime: TenantRuntime = NO_RUNTIME) -> None:
        self.env = env
        self.tenant = tenant
        # its tenant's OS user (its job process runs as it), memory and CPU (its cgroup)
        self.runtime = runtime
        self.job_id = job_id
        self.epoch = epoch
        self.spec = spec
        self.streaming = spec.streaming
        self.intents = NO_INTENTS
        self.state = AttemptState(
            RestartStrategy.from_config(env.conf, spec.restart_strategy, self.streaming),
            self.streaming, losses=losses)
        self.events: asyncio.Queue = asyncio.Queue()
        self.process: Optional[JobProcess] = None
        self.session_id: Optional[str] = None
        self.task: Optional[asyncio.Task] = None
        self.connect = not spec.classic
        # the engine a connect-mode job runs on (jm/cluster/jobs/jobengine.py)
        self.engine = JobEngine(
            env.engines, env.engines.key_for(tenant, job_id), f"job:{job_id}:{epoch}",
            runtime, env.conf.spark.startup_timeout
        ) if self.connect and env.engines is not None else None
        # its own Python environment (jm/cluster/jobs/jobpython.py), when it names requirements
        self.python = JobPython(env.envs, list(spec.requirements)) \
            if spec.requirements else None
        self._helpers: set[asyncio.Task] = set()   # exit watchers, timers, report outcomes
        self._savepoint_tasks: dict[str, asyncio.Task] = {}
        self.log = logging.LoggerAdapter(log, {"job": job_id, "epoch": epoch})
        self.spark_app = SparkReports(job_id, lambda info: self._send(
            S.RUNNING, info=dict(info, restart=self.restart_index)), self.log)
        self.progress = ProgressReports(  # a streaming job's last progress (throttled)
            job_id, lambda p: self._send(S.RUNNING, progress=p),
            env.conf["jobmanager.streaming.progress-interval"], self.log, env.monotonic)
        self.tee = StdoutTee(env.conf, env.node)  # jobmanager.job-log.stdout

    @property
    def job_dir(self) -> str:
        return os.path.join(self.env.conf.path("high-availability.storageDir"), self.job_id)

    @property
    def checkpoint_dir(self) -> str:
        return os.path.join(self.job_dir, "checkpoints")

    @property
    def restart_index(self) -> int:
        return self.state.restart

    def start(self) -> asyncio.Task:
        self.task = asyncio.create_task(self._run(), name=f"jobmaster-{self.job_id}")
        return self.task

    def cancel(self) -> None:
        self.update(replace(self.intents, cancel=True))

    def update(self, intents: Intents) -> None:
        if intents is self.intents:  # (the common case: nothing asked, NONE again)
            return
        if intents != self.intents:
            self.intents = intents
            if self.task is None:  # not started: its state starts with them (no spawn)
                self.state.handle(IntentsChanged(intents), 0.0, 0.0)  # (NEW: no instruction)
            else:
                self.events.put_nowait(IntentsChanged(intents))
        for trigger_id, target in intents.savepoints:
            if trigger_id not in self._savepoint_tasks:
                self._savepoint_tasks[trigger_id] = asyncio.create_task(
                    self._savepoint(trigger_id, target))

    async def stop(self) -> None:
        """Stop without reporting (the job moved away, or this peer is fenced/stopping)."""
        if self.process:
            self.env.executor.kill(self.process, signal.SIGKILL)
        self._release()
        tasks = [t for t in [self.task, *self._savepoint_tasks.values(),
                             *self.spark_app.pending(), *self.progress.pending(),
                             *self.tee.pending(),
                             *self._helpers] if t and not t.done()]
        for t in tasks:
            t.cancel()
        if tasks:  # bounded: a task that ignores its cancellation must not hold the peer
            done, late = await asyncio.wait(tasks, timeout=STOP_WAIT)
            for t in done:  # retrieved: an error while stopping is not news
                if not t.cancelled():
                    t.exception()
            if late:
                self.log.error("job %s: %d task(s) did not stop within %.0f s", self.job_id,
                               len(late), STOP_WAIT)

    def _send(self, status: str, result: Any = None, failure: Any = None,
              info: Optional[dict] = None, progress: Optional[dict] = None
              ) -> asyncio.Future:
        # whatever the job wrote or however it ended, what goes to Raft is readable text
        # (no lone surrogate msgpack refuses) of bounded size (jobmanager.failure.max-size)
        if failure is not None:
            failure = bounded_failure(failure, self.env.conf["jobmanager.failure.max-size"])
        if result is not None:
            result = storable(result)
        return asyncio.ensure_future(self.env.reporter.submit(StatusReport(
            self.job_id, self.epoch, self.env.node, status, self.env.clock(), result, failure,
            next_report_seq(), info, progress)))

    async def _shipped_files(self, params: RunParams) -> RunParams:
        """spark-submit's --jars, --files and --archives that are artifacts, as this
        peer's copies (the peer's own files: handed to a job of another user)."""
        refs = artifact_refs(dict(params.spark_conf))
        if not refs:
            return params
        local = dict(zip(refs, await self.env.resolve_pyfiles(refs)))
        return replace(params, spark_conf=with_local_files(dict(params.spark_conf), local),
                       peer_files=params.peer_files + tuple(local.values()))

    def _peer_files(self, pyfiles: list[str], script: Optional[str]) -> tuple[str, ...]:
        """The resolved pyfiles and script that are artifacts: the peer's copies."""
        named = list(self.spec.pyfiles) + [self.spec.script]
        return tuple(path for given, path in zip(named, list(pyfiles) + [script])
                     if path and isinstance(given, str) and given.startswith("artifact:"))

    def _shown_names(self, pyfiles: list[str], script: Optional[str]
                     ) -> tuple[tuple[str, str], ...]:
        """(local path, the name the user gave) of its code: an uploaded file by its
        upload's name (the peer keeps it under that name), any other as given."""
        named = list(self.spec.pyfiles) + [self.spec.script]
        return tuple((path, os.path.basename(path.rstrip("/"))
                      if given.startswith("artifact:") else given)
                     for given, path in zip(named, list(pyfiles) + [script])
                     if path and isinstance(given, str) and path != given)

    def _params(self, pyfiles: list[str], run_dir: str,
                script: Optional[str] = None) -> RunParams:
        env = self.env
        remote, ready = env.spark_remote(), env.spark_ready_file
        if self.engine is not None and self.engine.server is not None:
            remote, ready = self.engine.server.url, self.engine.server.ready_file
        params = attempt_params(self.spec, env.conf, AttemptPlace(
            self.job_id, self.epoch, self.restart_index, env.node, run_dir, env.log_dir,
            self.checkpoint_dir, env.spark_conf_dir, remote, ready, self.session_id,
            tuple(pyfiles), script, self._peer_files(pyfiles, script),
            self._shown_names(pyfiles, script)), self.streaming)
        if self.runtime.os_user and not params.run_as:  # (a proxy-user allowed wins)
            params = replace(params, run_as=self.runtime.os_user)
        if self.runtime.memory or self.runtime.cpu:
            params = replace(params, memory=self.runtime.memory, cpu=self.runtime.cpu)
        token = own_token(self.engine.key, self.engine.server) if self.engine else None
        if token:  # a tenant's or a job's engine: its own token
            params = replace(params, spark_token=token)
        return params

    @property
    def engine_key(self) -> Any:
        """The key of its engine (None: a classic job, or a peer without engines)."""
        return self.engine.key if self.engine is not None else None

    def _run_dir(self, restart: int) -> str:
        # made by the job process (or the SQL worker) that writes into it: a mkdir on
        # the event loop waited for the disk the Raft journal keeps busy with fsyncs
        # (~4% of a busy leader's loop at saturation)
        return os.path.join(self.env.work_dir, "jobs", self.job_id, f"{self.epoch}-{restart}")

    async def _run(self) -> None:
        try:
            await self._feed(Begin())
            while not self.state.done:
                await self._feed(await self.events.get())
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.log.exception("JobMaster of %s crashed", self.job_id)
            if self.process:
                self.env.executor.kill(self.process, signal.SIGKILL)
                self.process = None
            try:  # never leave the job assigned here with nothing running it
                r = await self._send(S.FAILED, failure={
                    "exception": f"JobManager error: {type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc()[-16000:], "final": True})
                if not r.ok:
                    self.log.warning("report FAILED for %s refused: %s", self.job_id, r.error)
            except Exception:
                self.log.exception("could not report the failure of %s", self.job_id)
        finally:
            if self.process:
                self.env.executor.kill(self.process, signal.SIGKILL)
            for t in self._helpers:
                t.cancel()
            self._release()

    def _release(self) -> None:
        """What the JobMaster held for its attempts: its engine, its Python environment."""
        if self.engine is not None:
            self.engine.release()
        if self.python is not None:
            self.python.release()

    async def _feed(self, event: Any) -> None:
        """One event into the state; its instructions performed in order."""
        if isinstance(event, _Crash):
            raise event.exc
        live = self.state.live
        for ins in self.state.handle(event, self.env.monotonic(), random.random()):
            await self._do(ins)
        if self.state.live is not None and live is None:  # RUNNING is committed
            self.spark_app.running()
            self.note_server(self.env.spark_info())

    def _later(self, coro: Awaitable[Any]) -> None:
        """An event that comes later (an exit, a timer, a report's outcome): queued."""
        async def run() -> None:
            try:
                event = await coro
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the JobMaster's loop raises it (its crash path)
                event = _Crash(exc)
            if event is not None:
                self.events.put_nowait(event)
        task = asyncio.create_task(run())
        self._helpers.add(task)
        task.add_done_callback(self._helpers.discard)

    async def _do(self, ins: Any) -> None:
        """Perform one instruction; what it learns comes back as an event in the queue."""
        if isinstance(ins, Report):
            self._later(self._outcome(ins, self._send(ins.status, ins.result, ins.failure)))
        elif isinstance(ins, Spawn):
            self.events.put_nowait(await self._spawn(ins.restart))
        elif isinstance(ins, Kill):
            if self.process is not None and ins.restart == self.state.restart:
                if not ins.graceful:
                    self.log.warning("job %s did not stop within jobmanager.cancel-timeout; "
                                     "killing it", self.job_id)
                self.env.executor.kill(self.process,
                                       signal.SIGTERM if ins.graceful else signal.SIGKILL)
        elif isinstance(ins, ArmStopTimer):
            self._later(_after(self.env.conf["jobmanager.cancel-timeout"],
                               StopTimedOut(ins.restart)))
        elif isinstance(ins, WaitFor):
            self._later(_after(ins.seconds, DelayElapsed(ins.restart)))
        elif isinstance(ins, WaitForLease):
            self._later(self._lease_back())
        elif isinstance(ins, Done):
            if ins.fenced:
                self.log.info("job %s epoch %d fenced: %s", self.job_id, self.epoch, ins.reason)
        else:
            self.events.put_nowait(await self._io(ins))

    async def _io(self, ins: Any) -> Any:
        """The instructions that read or write files or commit to Raft: their event."""
        run_dir = self._run_dir(self.state.restart)
        if isinstance(ins, CleanupSession):
            await self._cleanup_session(run_dir)
            return SessionCleaned(ins.restart)
        if isinstance(ins, ReadResult):
            limit = self.env.conf["jobmanager.result.max-size"]
            return ResultRead(ins.restart, *await asyncio.to_thread(read_result, run_dir, limit))
        if isinstance(ins, ReadFailure):
            limit = self.env.conf["jobmanager.failure.max-size"]
            failure = await asyncio.to_thread(read_failure, run_dir, ins.code, ins.signal, limit)
            if self.engine is not None:  # its engine's death, when that ended it
                failure = await asyncio.to_thread(
                    self.engine.failure, ins.restart, failure, self.session_id,
                    lambda: checkpoint_query_ids(self.checkpoint_dir))
            return FailureRead(ins.restart, failure)
        if isinstance(ins, TakeSavepoint):
            return SavepointTaken(*await self._take_savepoint(ins.trigger_id, ins.target))
        if isinstance(ins, Release):
            self.log.info("job %s epoch %d stopped for its move to %s", self.job_id,
                          self.epoch, self.intents.move_to)
            res = await self._commit(ReleaseJob(self.job_id, self.epoch, self.env.node,
                                                self.env.clock()))
            if res.ok and self.env.metrics is not None:
                self.env.metrics.moves.inc()
            return Committed(res.ok, res.code, res.error)
        if isinstance(ins, CompleteStop):
            res = await self._commit(CompleteSavepoint(
                self.job_id, self.epoch, self.env.node, ins.trigger_id, ins.location,
                ins.failure, self.env.clock(), storable(ins.result)))
            return Committed(res.ok, res.code, res.error)
        raise TypeError(f"no driver for {ins!r}")

    async def _outcome(self, ins: Report, sent: Awaitable[Any]) -> Reported:
        r = await sent
        if r.ok and ins.status == S.RESTARTING and self.env.metrics is not None:
            self.env.metrics.restarts.inc()
        if not r.ok and r.code != "stale":
            self.log.warning("report %s for %s refused: %s", ins.status, self.job_id, r.error)
        return Reported(ins.status, ins.restart, r.ok, r.code, r.error)

    async def _lease_back(self) -> LeaseBack:
        await self.env.wait_lease()  # the watchdog stops this JobMaster, or it returns
        return LeaseBack()

    async def _spawn(self, restart: int) -> Any:
        """Resolve the code, restore a savepoint, start the job process: Spawned (its exit
        watched from now on) or SpawnFailed."""
        run_dir = self._run_dir(restart)
        try:
            pyfiles = await self.env.resolve_pyfiles(list(self.spec.pyfiles))
            script = None
            if self.spec.script:
                script = (await self.env.resolve_pyfiles([self.spec.script]))[0]
            await self._restore()
            if self.python is not None:
                await self.python.acquire()
            if self.engine is not None:
                await self.engine.acquire()
            self.session_id = str(uuid.uuid4())
            if self.engine is not None:  # (its queries live as long as this JVM does)
                self.engine.note_spawn()
            params = await self._shipped_files(self._params(pyfiles, run_dir, script))
            if self.python is not None:
                params = await self.python.run_in(  # (spark.remote: not this host's)
                    params, self.connect, bool(self.env.engines and self.env.engines.embedded))
            started = await self.env.executor.spawn(params)
        except (ExecutorLost, OSError, ValueError, LookupError, NoEngine) as exc:
            failure = {"exception": f"{type(exc).__name__}: {exc}", "traceback": ""}
            missing = isinstance(exc, LookupError) and await asyncio.to_thread(
                missing_code, self.spec)
            if missing:  # a restart on this peer finds it missing all the same
                failure["hopeless"] = f"{missing} does not exist on this peer"
            return SpawnFailed(restart, failure)
        except EnvBuildError as exc:  # no restart installs what pip could not
            return SpawnFailed(restart, JobPython.failure(exc), final=True)
        except SavepointError as exc:  # no restart brings a missing savepoint back
            return SpawnFailed(restart, {"exception": f"SavepointError: {exc}", "traceback": "",
                                         "final": True,
                                         "reason": "the savepoint could not be restored"},
                               final=True)
        if isinstance(started, Refused):  # the zygote runs nothing without a lease
            self._later(self._ended(started.exit, restart, run_dir))
            return Spawned(restart, True)
        self.process = started.process
        if not self.connect:
            self.spark_app.watch_file(run_dir)
        if self.streaming:
            self.progress.watch_file(run_dir)
        self.tee.follow(params.log_path, self.job_id, f"{self.epoch}-{restart}")
        self._later(self._exit_of(self.process, restart, run_dir))
        return Spawned(restart, False)

    async def _exit_of(self, proc: JobProcess, restart: int, run_dir: str) -> Exited:
        ended = await proc.exited
        if self.process is proc:
            self.process = None
        return await self._ended(ended, restart, run_dir)

    async def _ended(self, ended: ProcessExit, restart: int, run_dir: str) -> Exited:
        self.spark_app.unwatch()
        self.progress.unwatch()
        await self.tee.stop()
        if not self.connect:  # its driver JVM is gone with it: its scratch files too
            await asyncio.to_thread(shutil.rmtree, os.path.join(run_dir, SCRATCH), True)
        return Exited(restart, ended.code, ended.signal, ended.fenced)

    def lose_engine(self, why: str, suspects: OomSuspects) -> None:
        """This job's engine died (`why`; `suspects`: whose work ran it out of memory): its
        running attempt lost its Spark session. It is killed and fails with the engine's
        death (jm/cluster/jobs/jobengine.py)."""
        if self.process is None or self.engine is None:
            return
        self.log.warning("job %s: %s", self.job_id, why)
        self.engine.died(self.state.restart, why, suspects)
        self.env.executor.kill(self.process, signal.SIGKILL)

    def note_server(self, info: Optional[dict]) -> None:
        """The peer's Connect server changed (its application, waiting for executors):
        a connect-mode job's running attempt says so."""
        if self.connect and self.state.live is not None and info is not None:
            self.spark_app.note_server(info)

    async def _take_savepoint(self, trigger_id: str, target: Optional[str]
                              ) -> tuple[Optional[str], Optional[str]]:
        location = new_location(target or self.env.conf.savepoints_dir(), self.job_id)
        meta = {"job-id": self.job_id, "request-id": trigger_id, "attempt": self.epoch,
                "node": self.env.node, "time": self.env.clock(), "tenant": self.tenant}
        try:
            await asyncio.to_thread(snapshot, self.checkpoint_dir, location, meta,
                                    remotefs.options(self.env.conf))
        except SavepointError as exc:
            self.log.warning("savepoint %s of %s failed: %s", trigger_id, self.job_id, exc)
            return None, truncate(exc, self.env.conf["jobmanager.failure.max-size"])
        self.log.info("savepoint %s of job %s written to %s", trigger_id, self.job_id, location)
        return readable(location), None

    async def _savepoint(self, trigger_id: str, target: Optional[str]) -> None:
        """A savepoint while the job runs on (served by whichever attempt owns the job)."""
        try:
            location, failure = await self._take_savepoint(trigger_id, target)
            await self._commit(CompleteSavepoint(self.job_id, self.epoch, self.env.node,
                                                 trigger_id, location, failure,
                                                 self.env.clock()))
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log.exception("savepoint %s of %s", trigger_id, self.job_id)

    async def _commit(self, command: Any) -> Any:
        """Commit one command, retrying while Raft is unavailable (the lease watchdog stops
        this JobMaster if this peer is cut off); its Result (code "stale": fenced)."""
        while True:
            try:
                res = await self.env.commit(command)
            except RaftUnavailable as exc:
                self.log.info("%s for %s not committed yet: %s", type(command).__name__,
                              self.job_id, exc)
                await asyncio.sleep(0.2)  # a retry's pause, not a wait for state
                continue
            if not res.ok and res.code != "stale":
                self.log.warning("%s for %s refused: %s", type(command).__name__, self.job_id,
                                 res.error)
            return res

    async def _restore(self) -> None:
        path = self.spec.savepoint_path
        if path and await asyncio.to_thread(restore, path, self.checkpoint_dir, self.job_dir,
                                            remotefs.options(self.env.conf)):
            self.log.info("job %s restored from savepoint %s", self.job_id, path)
        gone = await asyncio.to_thread(sweep_temporaries, self.checkpoint_dir)
        if gone:
            self.log.info("job %s: %d half-written checkpoint file(s) of a killed attempt "
                          "deleted: %s", self.job_id, len(gone), ", ".join(gone[:3]))

    async def _cleanup_session(self, run_dir: str) -> None:
        """A killed job process leaves its streaming queries running in the Spark Connect
        server: stop them (through its session) before anyone else runs this job."""
        if (not self.session_id or not (self.engine and self.engine.server
                                        or self.env.spark_remote())
                or self.spec.classic):  # its queries died with its driver
            return
        if self.engine is not None and self.engine.restarted():
            return  # its queries died with its engine's JVM: no session to clean up
        params = cleanup_params(self._params([], run_dir), run_dir, self.session_id)
        try:
            started = await self.env.executor.spawn(params)
            if isinstance(started, Refused):  # no lease: the engine's jobs stop with it
                return
            try:
                await asyncio.wait_for(asyncio.shield(started.process.exited), 60)
            except asyncio.TimeoutError:
                self.env.executor.kill(started.process, signal.SIGKILL)
            out, _ = await asyncio.to_thread(read_json, params.result_path, MAX_INFO_SIZE)
            out = out if isinstance(out, dict) else {}
            self.log.info("job %s: stopped %s streaming queries left by the killed attempt",
                          self.job_id, (out.get("result") or {}).get("stopped"))
        except (ExecutorLost, OSError) as exc:
            self.log.error("job %s: could not stop the queries of its killed attempt: %s",
                           self.job_id, exc)


@dataclass(frozen=True)
class _Crash:
    """An error in a task that feeds the queue: the JobMaster's loop raises it."""
    exc: Exception


async def _after(seconds: float, event: Any) -> Any:
    await asyncio.sleep(seconds)  # a timer (the restart delay, the cancel timeout)
    return event
