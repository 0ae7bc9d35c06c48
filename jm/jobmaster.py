"""JobMaster: one per job assigned to this peer. Runs attempts in job processes,
reports status with its epoch (fencing token), applies the restart strategy."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import signal
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Optional

from raft import state as S
from raft.commands import ReportStatuses, StatusReport
from jm.batcher import Batcher
from jm.executor import ExecutorLost, JobProcess
from jm.restart import RestartStrategy, RestartTracker, on_failure

log = logging.getLogger("jm.jobmaster")


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
    clock: Callable[[], float]
    lease_valid: Callable[[], bool] = lambda: True


class Fenced(Exception):
    pass


class JobMaster:
    def __init__(self, env: JobEnv, job_id: str, epoch: int, spec: dict) -> None:
        self.env = env
        self.job_id = job_id
        self.epoch = epoch
        self.spec = spec
        self.cancel_event = asyncio.Event()
        self.process: Optional[JobProcess] = None
        self.task: Optional[asyncio.Task] = None
        self.restart_index = 0

    def start(self) -> asyncio.Task:
        self.task = asyncio.create_task(self._run(), name=f"jobmaster-{self.job_id}")
        return self.task

    def cancel(self) -> None:
        self.cancel_event.set()

    async def stop(self) -> None:
        """Stop without reporting (the job moved away, or this peer is fenced/stopping)."""
        if self.process:
            self.env.executor.kill(self.process, signal.SIGKILL)
        if self.task and not self.task.done():
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, Exception):
                pass

    def _send(self, status: str, result: Any = None, failure: Any = None) -> asyncio.Future:
        return asyncio.ensure_future(self.env.reporter.submit(StatusReport(
            self.job_id, self.epoch, self.env.node, status, self.env.clock(), result, failure)))

    async def _report(self, status: str, result: Any = None, failure: Any = None,
                      sent: Optional[asyncio.Future] = None) -> None:
        r = await (sent or self._send(status, result, failure))
        if not r.ok:
            if r.code == "stale":
                raise Fenced(r.error)
            log.warning("report %s for %s refused: %s", status, self.job_id, r.error)
            if status == S.FINISHED:  # e.g. a result the replicated state cannot hold
                await self._report(S.FAILED, failure={
                    "exception": f"the job's result could not be stored: {r.error}",
                    "traceback": "", "final": True})

    def _params(self, pyfiles: list[str], run_dir: str) -> dict:
        conf = self.env.conf
        return {
            "job_id": self.job_id, "attempt": self.epoch, "node": self.env.node,
            "entry": self.spec.get("entry"), "sql": self.spec.get("sql"),
            "args": self.spec.get("args") or {}, "pyfiles": pyfiles,
            "log_path": os.path.join(self.env.log_dir, "jobs", self.job_id,
                                     f"attempt-{self.epoch}-{self.restart_index}.log"),
            "result_path": os.path.join(run_dir, "result.json"),
            "error_path": os.path.join(run_dir, "error.json"),
            "checkpoint_dir": os.path.join(conf.path("high-availability.storageDir"),
                                           self.job_id, "checkpoints"),
            "restore_path": self.spec.get("savepoint-path"),
            "spark_remote": self.env.spark_remote(),
            "spark_ready_file": self.env.spark_ready_file,
            "spark_wait": conf["spark.connect.startup-timeout"],
            "max_result_rows": conf["sql.max-result-rows"],
            "max_result_size": conf["jobmanager.result.max-size"],
        }

    async def _run(self) -> None:
        try:
            await self._attempts()
        except Fenced as exc:
            log.info("job %s epoch %d fenced: %s", self.job_id, self.epoch, exc)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("JobMaster of %s crashed", self.job_id)
            if self.process:
                self.env.executor.kill(self.process, signal.SIGKILL)
                self.process = None
            try:  # never leave the job assigned here with nothing running it
                await self._report(S.FAILED, failure={
                    "exception": f"JobManager error: {type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc()[-16000:], "final": True})
            except Exception:
                log.exception("could not report the failure of %s", self.job_id)
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
            if self.cancel_event.is_set():
                if initializing is not None:
                    await self._report(S.INITIALIZING, sent=initializing)
                    initializing = None
                await self._report(S.CANCELED)
                return
            run_dir = os.path.join(self.env.work_dir, "jobs", self.job_id,
                                   f"{self.epoch}-{self.restart_index}")
            os.makedirs(run_dir, exist_ok=True)
            failure = None
            try:
                pyfiles = await self.env.resolve_pyfiles(self.spec.get("pyfiles") or [])
                self.process = await self.env.executor.spawn(self._params(pyfiles, run_dir))
            except (ExecutorLost, OSError, ValueError, LookupError) as exc:
                failure = {"exception": f"{type(exc).__name__}: {exc}", "traceback": ""}
            if initializing is not None:
                await self._report(S.INITIALIZING, sent=initializing)
                initializing = None
            if failure is None:
                refused = self.process.pid <= 0  # the zygote runs nothing without a lease
                if not refused:
                    await self._report(S.RUNNING)
                outcome = await self._wait_or_cancel()
                if outcome is None:
                    await self._report(S.CANCELED)
                    return
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
                if code == 0:
                    result = _read_json(os.path.join(run_dir, "result.json"))
                    await self._report(S.FINISHED, result=(result or {}).get("result"))
                    return
                failure = _read_json(os.path.join(run_dir, "error.json")) or {
                    "exception": _describe_exit(code, sig), "traceback": ""}
            tracker, decision = on_failure(strategy, tracker, self.env.clock(), random.random())
            if not decision.restart:
                failure = dict(failure, **{"final": True, "reason": decision.reason})
                await self._report(S.FAILED, failure=failure)
                return
            await self._report(S.RESTARTING, failure=failure)
            self.restart_index += 1
            try:
                await asyncio.wait_for(self.cancel_event.wait(), decision.delay)
            except asyncio.TimeoutError:
                pass

    async def _wait_or_cancel(self) -> Optional[tuple[int, int]]:
        """Wait for the process to exit; on cancel, stop it and return None."""
        proc = self.process
        cancel = asyncio.create_task(self.cancel_event.wait())
        try:
            await asyncio.wait({proc.exited, cancel}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancel.cancel()
        if not self.cancel_event.is_set():
            return proc.exited.result()
        self.env.executor.kill(proc, signal.SIGTERM)  # sets ctx.stop_requested
        try:
            await asyncio.wait_for(asyncio.shield(proc.exited),
                                   self.env.conf["jobmanager.cancel-timeout"])
        except asyncio.TimeoutError:
            self.env.executor.kill(proc, signal.SIGKILL)
            await proc.exited
        self.process = None
        return None


def _read_json(path: str) -> Optional[dict]:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _describe_exit(code: int, sig: int) -> str:
    if sig:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = str(sig)
        return f"the job process died with signal {name}"
    return f"the job process exited with code {code}"
