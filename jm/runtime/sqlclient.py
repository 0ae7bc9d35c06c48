"""The peer's side of its SQL worker process (jm/runtime/sqlworker.py): starts it (with the
parent-death signal, so it dies with the peer), sends requests and matches the replies.
If the worker dies, every request in flight fails with WorkerLost and the next request
starts a new worker (`generation` tells the gateway its sessions must be opened again).
ChildProcess is that machinery for any such process (jm/runtime/livyclient.py's too)."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import struct
import sys
from typing import Any, Callable, Optional

from jm.policy.jobs.jobenv import child_environ
from jm.runtime import sqlproto as P
from jm.runtime.cgroups import remove_job_cgroup
from jm.runtime.confine import CONFINE_ENV, TENANT_CPU, TENANT_MEMORY, own_cgroup_name
from jm.runtime.zygote import PARENT_ENV

log = logging.getLogger("jm.sql.worker")


class WorkerLost(Exception):
    pass


class StatementError(Exception):
    """The worker answered with an error (Spark's message)."""


class ChildProcess:
    """A child process speaking framed requests and replies on its stdin and stdout
    (jm/runtime/sqlproto.py's framing): started through jm.runtime.pdeathsig (it dies with
    the peer), on demand; every request in flight fails with WorkerLost when it dies, and
    the next request starts a new one (`generation` counts the starts). A subclass names
    its module, its arguments and its protocol module."""
    what = "child process"
    log = log
    proto: Any = P.CODEC
    user: Optional[str] = None  # the OS user it runs as (a Livy session's proxyUser)
    confine: Optional[dict] = None  # JobLimits.to_dict(): applied by the child itself
    python: Optional[str] = None  # the interpreter it runs in (None: the peer's)

    def __init__(self, log_path: str, nice: int = 0,
                 on_start: Callable[[int], None] = lambda pid: None, env_pass: tuple = (),
                 env_add: Optional[dict] = None) -> None:
        self.env_pass = env_pass  # jm.policy.jobs.jobenv
        self.env_add = dict(env_add or {})  # the Connect server's token
        self.log_path = log_path
        self.nice = nice
        self.on_start = on_start
        self.proc: Optional[asyncio.subprocess.Process] = None
        self.generation = 0
        self._pending: dict[int, asyncio.Future] = {}
        self._next_id = 0
        self._reader: Optional[asyncio.Task] = None
        self._starting: Optional[asyncio.Future] = None
        self._closing = False

    def command(self) -> list:
        """The module to run and its arguments (after `python -m`)."""
        raise NotImplementedError

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    async def ensure(self) -> None:
        if self.alive:
            return
        if self._closing:
            raise WorkerLost(f"the {self.what} is stopping")
        if self._starting is None or self._starting.done():
            self._starting = asyncio.ensure_future(self._start())
        await asyncio.shield(self._starting)

    async def _start(self) -> None:
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        env = dict(child_environ(os.environ, self.env_pass), **self.env_add,
                   JM_NICE=str(self.nice),
                   PYTHONUNBUFFERED="1")
        env[PARENT_ENV] = str(os.getpid())
        if self.confine is not None:
            env[CONFINE_ENV] = json.dumps(self.confine)
        with open(self.log_path, "ab") as err:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "jm.runtime.pdeathsig", self.python or sys.executable,
                "-m",
                *self.command(),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err,
                env=env, limit=self.proto.max_frame,
                **({"user": self.user} if self.user else {}))
        self.generation += 1
        self.on_start(self.proc.pid)
        self.log.info("%s started (pid %d, generation %d)", self.what[0].upper() + self.what[1:],
                      self.proc.pid, self.generation)
        self._reader = asyncio.create_task(self._read(self.proc))

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        try:
            while True:
                head = await proc.stdout.readexactly(4)
                (size,) = struct.unpack(">I", head)
                if size > self.proto.max_frame:  # (the process cuts its results first)
                    self.log.error("%s sent a frame of %d bytes, more than %d: stopped",
                                   self.what, size, self.proto.max_frame)
                    break
                body = await proc.stdout.readexactly(size)
                try:
                    request_id, reply = self.proto.unpack(body)
                except Exception:
                    self.log.exception("undecodable reply from the %s", self.what)
                    continue
                fut = self._pending.pop(request_id, None)
                if fut is not None and not fut.done():
                    fut.set_result(reply)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            if proc.returncode is None:
                try:
                    proc.kill()
                except ProcessLookupError:
                    pass
            code = await proc.wait()
            if self.confine and (self.confine.get(TENANT_MEMORY) or self.confine.get(TENANT_CPU)):
                remove_job_cgroup(own_cgroup_name(proc.pid))  # (its tenant's: now empty)
            if not self._closing:
                self.log.error("%s exited with code %s", self.what[0].upper() + self.what[1:],
                               code)
            pending, self._pending = self._pending, {}
            for fut in pending.values():
                if not fut.done():
                    fut.set_exception(WorkerLost(f"the {self.what} exited with code {code}"))

    async def call(self, message: Any, timeout: Optional[float] = None) -> Any:
        """Send one request; its value, or StatementError with the worker's message."""
        await self.ensure()
        proc = self.proc
        self._next_id += 1
        request_id = self._next_id
        fut = asyncio.get_running_loop().create_future()
        self._pending[request_id] = fut
        try:
            proc.stdin.write(self.proto.pack(message, request_id))
            await proc.stdin.drain()
        except (ConnectionError, RuntimeError) as exc:
            self._pending.pop(request_id, None)
            raise WorkerLost(f"the {self.what} is gone: {exc}")
        try:
            reply = await (asyncio.wait_for(fut, timeout) if timeout else fut)
        finally:
            self._pending.pop(request_id, None)
        if not reply.ok:
            raise StatementError(reply.error or "error")
        return reply.value

    async def close(self, timeout: float = 5.0) -> None:
        self._closing = True
        proc = self.proc
        if proc is None:
            return
        if proc.returncode is None:
            try:
                proc.stdin.close()  # the worker ends at the end of its input
            except Exception:
                pass
            try:
                await asyncio.wait_for(proc.wait(), timeout)
            except asyncio.TimeoutError:
                proc.kill()
        if self._reader is not None:
            await asyncio.wait({self._reader}, timeout=timeout)

    def kill(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass


class SqlWorker(ChildProcess):
    what = "SQL worker"

    def __init__(self, remote: str, threads: int, log_path: str, nice: int = 0,
                 on_start: Callable[[int], None] = lambda pid: None, env_pass: tuple = (),
                 env_add: Optional[dict] = None) -> None:
        super().__init__(log_path, nice, on_start, env_pass, env_add)
        self.remote = remote
        self.threads = threads

    def command(self) -> list:
        return ["jm.runtime.sqlworker", self.remote, str(self.threads)]
