"""Peer side of job execution: drives the warm zygote and tracks job processes."""
from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import signal
import struct
import sys
from dataclasses import dataclass, field
from typing import Optional, Union

from jm.config import ConfigError
from jm.policy.jobs.jobenv import child_environ
from jm.policy.jobs.runparams import RunParams
from jm.runtime.limits import JobLimits, check_user
from jm.runtime.zygoteproto import (CGROUP_ENV, LIMITS_ENV, PARENT_ENV, Error, Exited, Guard,
                                    Lease, Ready, Spawn, Spawned, pack, unpack)

log = logging.getLogger("jm.runtime.executor")


@dataclass(frozen=True)
class ProcessExit:
    """How a job process ended (the zygote's Exited, or the peer's own for one it could
    not see end)."""
    code: int              # its exit code; -N when signal N ended it
    signal: int = 0        # the signal that ended it, 0 for none
    fenced: bool = False   # killed, or never started, because this peer's lease ran out


@dataclass
class JobProcess:
    key: str
    pid: int
    exited: asyncio.Future = field(repr=False)  # -> ProcessExit


@dataclass(frozen=True)
class Started:
    process: JobProcess


@dataclass(frozen=True)
class Refused:
    """Nothing started: the zygote runs nothing without a lease (`exit` says so)."""
    exit: ProcessExit


SpawnResult = Union[Started, Refused]


class ExecutorLost(Exception):
    pass


class ExecutorConfigError(ConfigError):
    """The job processes cannot run as configured (e.g. no such user); str() names the key."""


class Executor:
    """Starts job processes by asking the zygote to fork; restarts a dead zygote."""

    def __init__(self, log_dir: str, preload: str = "pyspark", nice: int = 0,
                 limits: Optional[JobLimits] = None, cgroup: bool = False,
                 cgroup_mount: Optional[str] = None, env_pass: tuple = (),
                 env_add: Optional[dict] = None) -> None:
        self.log_dir = log_dir
        self.env_pass = env_pass  # what of the peer's environment jobs see (jm.policy.jobs.jobenv)
        self.env_add = dict(env_add or {})  # ... and what they get besides (the Connect token)
        self.preload = preload
        self.nice = nice
        self.limits = limits or JobLimits()
        self.cgroup = cgroup
        self.cgroup_mount = cgroup_mount
        from jm.runtime.confine import user_uid
        problem = check_user(self.limits.user, os.getuid(), user_uid(self.limits.user))
        if problem:
            raise ExecutorConfigError(problem)
        self.proc: Optional[asyncio.subprocess.Process] = None
        self._spawns: dict[str, asyncio.Future] = {}
        self._procs: dict[str, JobProcess] = {}
        self._ready: Optional[asyncio.Future] = None
        self._reader: Optional[asyncio.Task] = None
        self._closing = False
        self._lock = asyncio.Lock()
        self._ids = itertools.count()
        self.zygote_pid: Optional[int] = None
        self._guarded: list[int] = []
        self._lease_until: Optional[float] = None

    async def start(self) -> None:
        os.makedirs(self.log_dir, exist_ok=True)
        stderr = open(os.path.join(self.log_dir, "zygote.log"), "ab")
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "jm.runtime.zygote",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
            env=dict(child_environ(os.environ, self.env_pass), **self.env_add, JM_ZYGOTE_PRELOAD=self.preload, JM_JOB_NICE=str(self.nice),
                     JM_CGROUP_MOUNT=self.cgroup_mount or "",
                     **{PARENT_ENV: str(os.getpid()),
                        LIMITS_ENV: json.dumps(self.limits.to_dict()),
                        CGROUP_ENV: "1" if self.cgroup else "0"}),
            # (the zygote leaves the peer's process group itself: a stop of that group,
            # Ctrl-Z, must not stop the process that fences the jobs)
            limit=2 ** 20)  # the zygote sets its own parent-death signal
        stderr.close()
        self._reader = asyncio.create_task(self._read_loop(self.proc))
        await asyncio.wait_for(asyncio.shield(self._ready), 120)
        if self._lease_until is not None:  # a restarted zygote enforces the same lease
            self.set_lease(self._lease_until)
        if self._guarded:  # ... and guards what the old one did
            self.guard(self._guarded)

    async def _read_loop(self, proc: asyncio.subprocess.Process) -> None:
        try:
            while True:
                head = await proc.stdout.readexactly(4)
                (n,) = struct.unpack(">I", head)
                msg = unpack(await proc.stdout.readexactly(n))
                if isinstance(msg, Ready):
                    self.zygote_pid = msg.pid
                    if msg.note:
                        (log.warning if "WARNING" in msg.note else log.info)(
                            "job executor: %s", msg.note)
                    if self._ready and not self._ready.done():
                        self._ready.set_result(True)
                elif isinstance(msg, Spawned):
                    fut = self._spawns.pop(msg.key, None)
                    if fut and not fut.done():
                        fut.set_result(msg.pid)
                    else:  # its JobMaster was stopped while it waited: nobody owns it
                        self._procs.pop(msg.key, None)
                        self.kill(JobProcess(msg.key, msg.pid, asyncio.get_running_loop()
                                             .create_future()))
                elif isinstance(msg, Exited):
                    fut = self._spawns.pop(msg.key, None)  # refused spawn (fenced)
                    if fut and not fut.done():
                        fut.set_result(msg.pid)
                    jp = self._procs.pop(msg.key, None)
                    if jp and not jp.exited.done():
                        jp.exited.set_result(ProcessExit(msg.code, msg.signal, msg.fenced))
                elif isinstance(msg, Error):  # a frame of ours it could not take
                    log.error("job executor: the zygote refused a message: %s", msg.reason)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            await self._zygote_gone()

    async def _zygote_gone(self) -> None:
        err = ExecutorLost("the job executor (zygote) exited; its job processes died with it")
        for fut in self._spawns.values():
            if not fut.done():
                fut.set_exception(err)
        for jp in self._procs.values():
            if not jp.exited.done():
                jp.exited.set_result(ProcessExit(-int(signal.SIGKILL), int(signal.SIGKILL)))
        self._spawns.clear()
        self._procs.clear()
        if self._ready and not self._ready.done():
            self._ready.set_exception(err)
        if not self._closing:
            log.error("zygote exited (code %s); starting a new one",
                      self.proc.returncode if self.proc else None)
            try:
                await self.proc.wait()
                await self.start()
            except Exception:
                log.exception("could not restart the zygote")

    async def spawn(self, params: RunParams) -> SpawnResult:
        if self.proc is None or self.proc.returncode is not None:
            raise ExecutorLost("the job executor is not running")
        key = f"{params.job_id}/{params.attempt}/{next(self._ids)}"
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        jp = JobProcess(key, 0, loop.create_future())
        self._spawns[key] = fut
        self._procs[key] = jp
        self.proc.stdin.write(pack(Spawn(key, params)))
        try:
            await self.proc.stdin.drain()
        except ConnectionError as exc:
            raise ExecutorLost(str(exc))
        jp.pid = await fut
        if jp.pid <= 0:  # the zygote's Exited (fenced) came instead of its Spawned
            return Refused(jp.exited.result() if jp.exited.done()
                           else ProcessExit(1, 0, True))
        return Started(jp)

    def running(self) -> int:
        """Job processes started and not yet exited."""
        return sum(1 for jp in self._procs.values() if jp.pid > 0 and not jp.exited.done())

    def set_lease(self, until: float) -> None:
        """Tell the zygote until when (CLOCK_MONOTONIC) this peer's lease is valid."""
        self._lease_until = until
        if self.proc is not None and self.proc.returncode is None:
            try:
                self.proc.stdin.write(pack(Lease(until)))
            except (ConnectionError, RuntimeError):
                pass

    def guard(self, pids: list[int]) -> None:
        """Processes the zygote kills with the job processes when the lease runs out."""
        self._guarded = list(pids)
        if self.proc is not None and self.proc.returncode is None:
            try:
                self.proc.stdin.write(pack(Guard(self._guarded)))
            except (ConnectionError, RuntimeError):
                pass

    @staticmethod
    def kill(jp: JobProcess, sig: int = signal.SIGKILL) -> None:
        if jp.pid <= 0:  # not forked yet: killpg(0) would hit our own process group
            return
        # SIGKILL ends the attempt's whole group (its driver JVM too); a graceful signal
        # goes to the job process alone, which stops its driver itself (a JVM that got
        # SIGTERM would run its shutdown hooks under the running code)
        for fn in ((os.killpg, os.kill) if sig == signal.SIGKILL else (os.kill,)):
            try:
                fn(jp.pid, sig)
                return
            except ProcessLookupError:
                continue
            except PermissionError:
                return

    async def close(self) -> None:
        self._closing = True
        for jp in list(self._procs.values()):
            self.kill(jp)  # in-flight spawns die with the zygote (parent-death signal)
        if self.proc and self.proc.returncode is None:
            try:
                self.proc.stdin.close()
            except Exception:
                pass
            try:
                await asyncio.wait_for(self.proc.wait(), 5)
            except asyncio.TimeoutError:
                log.error("the zygote did not exit within 5 s of EOF; killing it (pid %d)",
                          self.proc.pid)
                try:
                    self.proc.kill()  # its job processes die with it (parent-death signal)
                except ProcessLookupError:
                    pass
                try:
                    await asyncio.wait_for(self.proc.wait(), 5)
                except asyncio.TimeoutError:
                    log.error("zygote pid %d not reaped", self.proc.pid)
        if self._reader:
            self._reader.cancel()
