"""JobMaster: one per job assigned to this peer. Runs attempts in job processes,
reports status with its epoch (fencing token), applies the restart strategy."""
from __future__ import annotations

import asyncio
import logging
import os
import random
import shutil
import signal
import time
import traceback
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Optional

from raft import state as S
from raft.commands import CompleteSavepoint, ReleaseJob, ReportStatuses, StatusReport
from raft.node import RaftUnavailable
from jm.cluster.batcher import Batcher
from jm.cluster.waits import wait_event
from jm.runtime.executor import ExecutorLost, JobProcess
from jm.runtime.sparkapp import INFO_FILE, SCRATCH
from jm.policy.bounds import bounded_failure, json_size, readable, storable, truncate
from jm.policy.restart import RestartStrategy, RestartTracker, on_failure
from jm.cluster import remotefs
from jm.cluster.jobfiles import read_json
from jm.cluster.savepoint import SavepointError, new_location, restore, snapshot

log = logging.getLogger("jm.cluster.jobmaster")


_last_seq = 0
STOP_WAIT = 5.0  # seconds a stopping JobMaster waits for its cancelled tasks
MAX_INFO_SIZE = 16 * 1024  # bytes of an attempt's Spark details (spark.json) kept


def next_report_seq() -> int:
    """StatusReport.seq: strictly increasing within this process (a wall clock step back
    does not lower it: it only counts on from the last value). It starts from the wall
    clock in microseconds only for readability; no order across processes rests on it:
    the state machine compares seqs within one epoch, and a restarted peer (a new pid)
    has its jobs assigned again with a new epoch, whose seqs start afresh."""
    global _last_seq
    _last_seq = max(_last_seq + 1, time.time_ns() // 1000)
    return _last_seq


def make_reporter(raft, timeout: float) -> Batcher:
    """Batches the status reports of all JobMasters of a peer into one Raft command."""
    return Batcher(raft, ReportStatuses, timeout, retry=True)


@dataclass
class JobEnv:
    """What a JobMaster needs from its peer (a small gateway, no peer internals)."""
    node: str
    conf: Any
    executor: Any
    reporter: Batcher
    resolve_pyfiles: Callable  # async (list[str]) -> list[str] local paths
    spark_remote: Callable[[], Optional[str]]
    spark_ready_file: Optional[str]
    log_dir: str
    work_dir: str
    # wall clock: only stamps what is shown to people (report and savepoint times); no
    # decision compares it, on this host or with another host's stamps
    clock: Callable[[], float]
    lease_valid: Callable[[], bool] = lambda: True
    commit: Optional[Callable[[Any], Awaitable[Any]]] = None  # one Raft command -> Result
    metrics: Any = None  # jm.cluster.metrics.PeerMetrics
    spark_conf_dir: Optional[str] = None  # SPARK_CONF_DIR for jobs' drivers
    # the peer's Connect server application on a Spark cluster (id, UI, executors, a
    # waiting note), None otherwise
    spark_info: Callable[[], Optional[dict]] = lambda: None
    # monotonic clock of this host: restart delays and failure-rate windows are measured
    # on it, so a wall clock step (NTP, an operator) neither shortens nor stretches them
    monotonic: Callable[[], float] = time.monotonic


@dataclass(frozen=True)
class Intents:
    """What the replicated state asks of this job's owner right now."""
    cancel: bool = False
    move_to: Optional[str] = None
    stop: Optional[tuple] = None          # (trigger id, target dir or None)
    savepoints: tuple = ()                # ((trigger id, target dir or None), ...)

    @staticmethod
    def of(job: S.JobRecord) -> "Intents":
        stop = None
        plain = []
        for sp in job.pending_savepoints():
            if sp.stop and sp.id == job.stop_trigger:
                stop = (sp.id, sp.target)
            elif not sp.stop:
                plain.append((sp.id, sp.target))
        return Intents(job.cancel_requested, job.move_to, stop, tuple(plain))


class Fenced(Exception):
    pass


class JobMaster:
    def __init__(self, env: JobEnv, job_id: str, epoch: int, spec: dict) -> None:
        self.env = env
        self.job_id = job_id
        self.epoch = epoch
        self.spec = spec
        self.streaming = spec.get("job-type") == S.STREAMING
        self.intents = Intents()
        self.wake = asyncio.Event()  # set whenever the intents change
        self.process: Optional[JobProcess] = None
        self.session_id: Optional[str] = None
        self.task: Optional[asyncio.Task] = None
        self.restart_index = 0
        self.connect = spec.get("spark-mode") != "classic"
        self._live: Optional[int] = None      # the restart whose RUNNING was reported
        self._told_waiting = False            # its server's waiting note was reported
        self._info_tasks: set[asyncio.Task] = set()
        self._savepoint_tasks: dict[str, asyncio.Task] = {}
        self.log = logging.LoggerAdapter(log, {"job": job_id, "epoch": epoch})

    @property
    def job_dir(self) -> str:
        return os.path.join(self.env.conf.path("high-availability.storageDir"), self.job_id)

    @property
    def checkpoint_dir(self) -> str:
        return os.path.join(self.job_dir, "checkpoints")

    def start(self) -> asyncio.Task:
        self.task = asyncio.create_task(self._run(), name=f"jobmaster-{self.job_id}")
        return self.task

    def cancel(self) -> None:
        self.update(Intents(cancel=True, move_to=self.intents.move_to, stop=self.intents.stop,
                            savepoints=self.intents.savepoints))

    def update(self, intents: Intents) -> None:
        if intents != self.intents:
            self.intents = intents
            self.wake.set()
        for trigger_id, target in intents.savepoints:
            if trigger_id not in self._savepoint_tasks:
                self._savepoint_tasks[trigger_id] = asyncio.create_task(
                    self._savepoint(trigger_id, target))

    def _intent(self) -> Optional[str]:
        i = self.intents
        return "cancel" if i.cancel else "stop" if i.stop else "move" if i.move_to else None

    async def stop(self) -> None:
        """Stop without reporting (the job moved away, or this peer is fenced/stopping)."""
        if self.process:
            self.env.executor.kill(self.process, signal.SIGKILL)
        tasks = [t for t in [self.task, *self._savepoint_tasks.values(), *self._info_tasks]
                 if t and not t.done()]
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
              info: Optional[dict] = None) -> asyncio.Future:
        # whatever the job wrote or however it ended, what goes to Raft is readable text
        # (no lone surrogate msgpack refuses) of bounded size (jobmanager.failure.max-size)
        if failure is not None:
            failure = bounded_failure(failure, self.env.conf["jobmanager.failure.max-size"])
        if result is not None:
            result = storable(result)
        return asyncio.ensure_future(self.env.reporter.submit(StatusReport(
            self.job_id, self.epoch, self.env.node, status, self.env.clock(), result, failure,
            next_report_seq(), info)))

    async def _report(self, status: str, result: Any = None, failure: Any = None,
                      sent: Optional[asyncio.Future] = None, info: Optional[dict] = None,
                      last_resort: bool = False) -> None:
        r = await (sent or self._send(status, result, failure, info))
        if r.ok and status == S.RESTARTING and self.env.metrics is not None:
            self.env.metrics.restarts.inc()
        if not r.ok:
            if r.code == "stale":
                raise Fenced(r.error)
            self.log.warning("report %s for %s refused: %s", status, self.job_id, r.error)
            if status == S.FINISHED:  # e.g. a result the replicated state cannot hold
                await self._report(S.FAILED, failure={
                    "exception": f"the job's result could not be stored: {r.error}",
                    "traceback": "", "final": True})
            elif status == S.FAILED and not last_resort:
                # the job must end: a failure the state cannot hold ends it all the same
                await self._report(S.FAILED, failure={
                    "exception": f"the job failed; its failure could not be stored: "
                                 f"{r.error}", "traceback": "", "final": True},
                    last_resort=True)

    def _params(self, pyfiles: list[str], run_dir: str, script: Optional[str] = None) -> dict:
        conf = self.env.conf
        return {
            "job_id": self.job_id, "attempt": self.epoch, "node": self.env.node,
            "name": self.spec.get("name"), "streaming": self.streaming,
            "entry": self.spec.get("entry"), "sql": self.spec.get("sql"),
            "script": script, "argv": self.spec.get("argv") or [],
            "spark_mode": self.spec.get("spark-mode") or "connect",
            "spark_conf": self.spec.get("spark-conf") or {},
            "spark_master": conf["spark.master"],
            "spark_defaults": conf.spark_conf,
            "driver_host": self.env.node.rsplit(":", 1)[0],
            "spark_conf_dir": self.env.spark_conf_dir,
            "spark_waiting_after": conf["spark.executor-wait-warning"],
            "args": self.spec.get("args") or {}, "pyfiles": pyfiles,
            "log_path": os.path.join(self.env.log_dir, "jobs", self.job_id,
                                     f"attempt-{self.epoch}-{self.restart_index}.log"),
            "result_path": os.path.join(run_dir, "result.json"),
            "error_path": os.path.join(run_dir, "error.json"),
            "scratch_dir": os.path.join(run_dir, SCRATCH),
            "checkpoint_dir": self.checkpoint_dir,
            "restore_path": self.spec.get("savepoint-path"),
            "spark_remote": self.env.spark_remote(),
            "session_id": self.session_id,
            "spark_ready_file": self.env.spark_ready_file,
            "spark_wait": conf["spark.connect.startup-timeout"],
            "max_result_rows": conf["sql.max-result-rows"],
            "max_result_size": conf["jobmanager.result.max-size"],
            "max_failure_size": conf["jobmanager.failure.max-size"],
        }

    async def _run(self) -> None:
        try:
            await self._attempts()
        except Fenced as exc:
            self.log.info("job %s epoch %d fenced: %s", self.job_id, self.epoch, exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.log.exception("JobMaster of %s crashed", self.job_id)
            if self.process:
                self.env.executor.kill(self.process, signal.SIGKILL)
                self.process = None
            try:  # never leave the job assigned here with nothing running it
                await self._report(S.FAILED, failure={
                    "exception": f"JobManager error: {type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc()[-16000:], "final": True})
            except Exception:
                self.log.exception("could not report the failure of %s", self.job_id)
        finally:
            if self.process:
                self.env.executor.kill(self.process, signal.SIGKILL)

    async def _attempts(self) -> None:
        strategy = RestartStrategy.from_config(self.env.conf, self.spec.get("restart-strategy"))
        tracker = RestartTracker()
        # INITIALIZING is not awaited before the spawn: it is committed in the same batch
        # as RUNNING (order kept); a stale epoch still fences the attempt at RUNNING.
        initializing: Optional[asyncio.Future] = self._send(S.INITIALIZING)
        while True:
            if self._intent() is not None:  # nothing runs: act on the request right away
                if initializing is not None:
                    await self._report(S.INITIALIZING, sent=initializing)
                    initializing = None
                if await self._conclude(self._intent(), None):
                    return
            # made by the job process (or the SQL worker) that writes into it: a mkdir on
            # the event loop waited for the disk the Raft journal keeps busy with fsyncs
            # (~4% of a busy leader's loop at saturation)
            run_dir = os.path.join(self.env.work_dir, "jobs", self.job_id,
                                   f"{self.epoch}-{self.restart_index}")
            failure = None
            try:
                pyfiles = await self.env.resolve_pyfiles(self.spec.get("pyfiles") or [])
                script = None
                if self.spec.get("script"):
                    script = (await self.env.resolve_pyfiles([self.spec["script"]]))[0]
                await self._restore()
                self.session_id = str(uuid.uuid4())
                self.process = await self.env.executor.spawn(
                    self._params(pyfiles, run_dir, script))
            except (ExecutorLost, OSError, ValueError, LookupError) as exc:
                failure = {"exception": f"{type(exc).__name__}: {exc}", "traceback": ""}
            except SavepointError as exc:  # no restart brings a missing savepoint back
                failure = {"exception": f"SavepointError: {exc}", "traceback": "",
                           "final": True, "reason": "the savepoint could not be restored"}
            if initializing is not None:
                await self._report(S.INITIALIZING, sent=initializing)
                initializing = None
            if failure is not None and failure.get("final"):
                await self._report(S.FAILED, failure=failure)
                return
            if failure is None:
                refused = self.process.pid <= 0  # the zygote runs nothing without a lease
                if not refused:
                    await self._report(S.RUNNING)
                    self._live, self._told_waiting = self.restart_index, False
                    self.note_server(self.env.spark_info())
                watch = (None if self.connect
                         else asyncio.create_task(self._watch_spark(run_dir)))
                try:
                    outcome = await self._wait_or_intent(run_dir)
                finally:
                    self._live = None
                    if watch is not None:
                        watch.cancel()
                if not self.connect:  # its driver JVM is gone with it: its scratch files too
                    await asyncio.to_thread(shutil.rmtree, os.path.join(run_dir, SCRATCH), True)
                if outcome is None:  # stopped for a request (cancel, stop, move)
                    result, _ = await self._read_result(run_dir)
                    intent = self._intent()  # None: the request was withdrawn meanwhile
                    if intent is not None and await self._conclude(intent, result):
                        return
                    self.restart_index += 1
                    continue
                code, sig, fenced = outcome
                self.process = None
                if fenced:
                    # the lease ran out (this peer was frozen or cut off): not the job's
                    # fault; run it again if we still own it (a stale epoch ends us here)
                    await self._report(S.RESTARTING, failure={
                        "exception": "LeaseExpired: the job process was stopped because this "
                                     "peer lost its lease", "traceback": ""})
                    self.restart_index += 1
                    while not self.env.lease_valid():
                        await asyncio.sleep(0.1)  # the watchdog stops us, or the lease returns
                    continue
                if sig and self.streaming:  # its queries may outlive it in the Spark server
                    await self._cleanup_session(run_dir)
                if code == 0:
                    result, problem = await self._read_result(run_dir)
                    if problem is None:
                        await self._report(S.FINISHED, result=result)
                        return
                    failure = {"exception": problem, "traceback": ""}
                else:
                    failure = await self._read_failure(run_dir, code, sig)
            tracker, decision = on_failure(strategy, tracker, self.env.monotonic(),
                                           random.random())
            if not decision.restart:
                failure = dict(failure, **{"final": True, "reason": decision.reason})
                await self._report(S.FAILED, failure=failure)
                return
            await self._report(S.RESTARTING, failure=failure)
            self.restart_index += 1
            await self._wait_for_intent(decision.delay)

    async def _read_result(self, run_dir: str) -> tuple[Any, Optional[str]]:
        """The result the job wrote (result.json), read off the event loop: (value, None),
        or (None, why) for a file over jobmanager.result.max-size (the job process checks
        what it returns, but a job can write the file itself) or not a regular file
        (jm/cluster/jobfiles.py)."""
        limit = self.env.conf["jobmanager.result.max-size"]
        path = os.path.join(run_dir, "result.json")
        out, refused = await asyncio.to_thread(read_json, path, limit + 64)
        if refused is not None:
            return None, "ValueError: the job's result.json " + (
                refused.why if refused.size is None else f"is {refused.size} bytes, more "
                f"than jobmanager.result.max-size ({limit} bytes)")
        return (out if isinstance(out, dict) else {}).get("result"), None

    async def _read_failure(self, run_dir: str, code: int, sig: int) -> dict:
        """The failure the job wrote (error.json), read off the event loop and bounded; the
        exit's description when there is none (or it is too large or not a regular file:
        jm/cluster/jobfiles.py)."""
        limit = self.env.conf["jobmanager.failure.max-size"]
        path = os.path.join(run_dir, "error.json")
        out, refused = await asyncio.to_thread(read_json, path, 8 * limit + 4096)
        if refused is not None:
            return {"exception": f"{_describe_exit(code, sig)}; its error.json " + (
                refused.why if refused.size is None else f"({refused.size} bytes) is over "
                f"what jobmanager.failure.max-size ({limit} bytes) allows: see the job's "
                "log"), "traceback": ""}
        if not isinstance(out, dict):
            return {"exception": _describe_exit(code, sig), "traceback": ""}
        return bounded_failure(out, limit)

    async def _watch_spark(self, run_dir: str) -> None:
        """Report the attempt's Spark application (id, UI, executors, a note when it waits
        for resources) whenever the job process (classic mode) writes new details."""
        path = os.path.join(run_dir, INFO_FILE)
        last: Any = None
        delay = 0.1
        while True:
            await asyncio.sleep(delay)
            info, _ = await asyncio.to_thread(read_json, path, MAX_INFO_SIZE)
            if info is not None and info != last:
                last = info
                if not await self._report_info(self._info_report(info)):
                    return
            delay = min(1.0, delay * 1.5)

    def note_server(self, info: Optional[dict]) -> None:
        """A connect-mode job runs on its peer's Connect server: while that server's
        application waits for executors on the Spark cluster, so does the job, and its
        attempt says so (reported when the note appears and when it goes, nothing
        otherwise: no write per job on the way in)."""
        if not self.connect or self._live is None or info is None:
            return
        waiting = bool(info.get("waiting"))
        if waiting or self._told_waiting:
            self._told_waiting = waiting
            # sent now, in order: it cannot overtake the attempt's end
            task = asyncio.create_task(self._report_info(self._info_report(info)))
            self._info_tasks.add(task)
            task.add_done_callback(self._info_tasks.discard)

    def _info_report(self, info: dict) -> asyncio.Future:
        info = storable({k: str(v)[:500] if isinstance(v, str) else v for k, v in info.items()})
        if json_size(info) > MAX_INFO_SIZE:  # bounded: only its plain fields
            info = {k: v for k, v in info.items() if not isinstance(v, (dict, list))}
        return self._send(S.RUNNING, info=dict(info, restart=self.restart_index))

    async def _report_info(self, sent: asyncio.Future) -> bool:
        """Await a report of Spark details for the running attempt; False once fenced."""
        try:
            await self._report(S.RUNNING, sent=sent)
        except Fenced:
            return False
        except Exception:  # the details are informative: never fail the attempt
            self.log.exception("job %s: reporting its Spark application", self.job_id)
        return True

    async def _wait_for_intent(self, timeout: Optional[float]) -> None:
        """Wait until a request (cancel, stop, move) arrives, at most `timeout` seconds."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while self._intent() is None:
            self.wake.clear()
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                return
            if not await wait_event(self.wake, left):
                return

    async def _wait_or_intent(self, run_dir: str) -> Optional[tuple[int, int, bool]]:
        """Wait for the process to exit; on a request, stop it gracefully and return None."""
        proc = self.process
        waiter = asyncio.create_task(self._wait_for_intent(None))
        try:
            await asyncio.wait({proc.exited, waiter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if proc.exited.done() or self._intent() is None:
            return proc.exited.result()
        self.env.executor.kill(proc, signal.SIGTERM)  # sets ctx.stop_requested
        try:
            await asyncio.wait_for(asyncio.shield(proc.exited),
                                   self.env.conf["jobmanager.cancel-timeout"])
        except asyncio.TimeoutError:
            self.log.warning("job %s did not stop within jobmanager.cancel-timeout; killing it",
                        self.job_id)
            self.env.executor.kill(proc, signal.SIGKILL)
            await proc.exited
        self.process = None
        code, sig, _ = proc.exited.result()
        if sig and self.streaming:
            await self._cleanup_session(run_dir)
        return None

    async def _conclude(self, intent: str, result: Any) -> bool:
        """Finish a cancel, stop-with-savepoint or move once no job process runs.
        False: a stop whose savepoint failed; the job runs on."""
        if intent == "cancel":
            await self._report(S.CANCELED)
            return True
        if intent == "move":
            self.log.info("job %s epoch %d stopped for its move to %s", self.job_id, self.epoch,
                     self.intents.move_to)
            res = await self._commit(ReleaseJob(self.job_id, self.epoch, self.env.node,
                                                self.env.clock()))
            if res.ok and self.env.metrics is not None:
                self.env.metrics.moves.inc()
            return True
        trigger_id, target = self.intents.stop
        location, failure = await self._take_savepoint(trigger_id, target)
        res = await self._commit(CompleteSavepoint(self.job_id, self.epoch, self.env.node,
                                                   trigger_id, location, failure,
                                                   self.env.clock(), storable(result)))
        if failure is None and res.ok:
            return True
        # the stop failed (or was superseded): run the job again, not counted as a failure
        self.intents = Intents(self.intents.cancel, self.intents.move_to, None,
                               self.intents.savepoints)
        return False

    async def _take_savepoint(self, trigger_id: str, target: Optional[str]
                              ) -> tuple[Optional[str], Optional[str]]:
        location = new_location(target or self.env.conf.savepoints_dir(), self.job_id)
        meta = {"job-id": self.job_id, "request-id": trigger_id, "attempt": self.epoch,
                "node": self.env.node, "time": self.env.clock()}
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
        except Fenced:
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            self.log.exception("savepoint %s of %s", trigger_id, self.job_id)

    async def _commit(self, command: Any) -> Any:
        """Commit one command, retrying while Raft is unavailable (the lease watchdog stops
        this JobMaster if this peer is cut off); a stale epoch means we were fenced."""
        while True:
            try:
                res = await self.env.commit(command)
            except RaftUnavailable as exc:
                self.log.info("%s for %s not committed yet: %s", type(command).__name__,
                         self.job_id, exc)
                await asyncio.sleep(0.2)
                continue
            if not res.ok and res.code == "stale":
                raise Fenced(res.error)
            if not res.ok:
                self.log.warning("%s for %s refused: %s", type(command).__name__, self.job_id,
                            res.error)
            return res

    async def _restore(self) -> None:
        path = self.spec.get("savepoint-path")
        if path and await asyncio.to_thread(restore, path, self.checkpoint_dir, self.job_dir,
                                            remotefs.options(self.env.conf)):
            self.log.info("job %s restored from savepoint %s", self.job_id, path)

    async def _cleanup_session(self, run_dir: str) -> None:
        """A killed job process leaves its streaming queries running in the Spark Connect
        server: stop them (through its session) before anyone else runs this job."""
        if (not self.session_id or not self.env.spark_remote()
                or self.spec.get("spark-mode") == "classic"):  # its queries died with its driver
            return
        params = self._params([], run_dir)
        params.update({"entry": None, "sql": None, "cleanup_session": self.session_id,
                       "job_id": self.job_id, "log_path": params["log_path"] + ".cleanup",
                       "result_path": os.path.join(run_dir, "cleanup.json"),
                       "error_path": os.path.join(run_dir, "cleanup-error.json")})
        try:
            proc = await self.env.executor.spawn(params)
            try:
                await asyncio.wait_for(asyncio.shield(proc.exited), 60)
            except asyncio.TimeoutError:
                self.env.executor.kill(proc, signal.SIGKILL)
            out, _ = await asyncio.to_thread(read_json, params["result_path"], MAX_INFO_SIZE)
            out = out if isinstance(out, dict) else {}
            self.log.info("job %s: stopped %s streaming queries left by the killed attempt",
                     self.job_id, (out.get("result") or {}).get("stopped"))
        except (ExecutorLost, OSError) as exc:
            self.log.error("job %s: could not stop the queries of its killed attempt: %s",
                      self.job_id, exc)


def _describe_exit(code: int, sig: int) -> str:
    if sig:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return f"the job process died with signal {name}"
    return f"the job process exited with code {code}"
