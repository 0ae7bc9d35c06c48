"""Supervision of the peer's own Spark Connect server (one JVM per peer).

The server is started from pyspark's own distribution (SPARK_HOME = the pyspark
package folder), bound to 127.0.0.1, with its output in the peer's log dir. When it
is up, a warm-up query runs through a job process (the peer itself never opens a
Spark channel), then the ready file is written; job processes wait for that file.
If the JVM dies it is started again.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import shutil
import subprocess
import sys
import time
from typing import Any, Callable, Optional

import aiohttp

from jm.policy.spark.enginedeath import DEATH_LOG, run_mark
from jm.policy.jobs.jobenv import child_environ
from jm.policy.jobs.runparams import TOKEN_ENV
from jm.runtime.cgroups import EngineCgroup
from jm.runtime.sparkapp import IdleSince, jvm_opts_env, local_dirs_env
from jm.runtime.ports import free_port
from jm.runtime.sparkjvm import (log_tail, port_open, server_info, spark_conf_dir,
                                 spark_home)
from jm.runtime.zygote import PARENT_ENV


log = logging.getLogger("jm.spark")


class SparkConnectServer:
    def __init__(self, port: int, master: str, log_dir: str, ready_file: str,
                 driver_memory: str, extra_conf: dict, log_level: str,
                 startup_timeout: float, warmup: Callable,
                 on_start: Callable[[int], None] = lambda pid: None, nice: int = 0,
                 on_ready_change: Callable[[], None] = lambda: None,
                 waiting_after: float = 30.0,
                 on_info: Callable[[dict], None] = lambda info: None,
                 scratch_dir: Optional[str] = None, env_pass: tuple = (),
                 token: Optional[str] = None,
                 on_exit: Callable[[Optional[int], str, int], None] = lambda c, t, o: None,
                 user: Optional[str] = None, work_dir: Optional[str] = None,
                 cgroup: Optional[EngineCgroup] = None,
                 class_archive: Optional[str] = None) -> None:
        self.port = port
        self.class_archive = class_archive  # spark.class-archive (jm/runtime/classarchive.py)
        # its tenant's memory limit and CPU weight (jm/runtime/cgroups.py), made at its
        # first start, removed when it is closed
        self.cgroup = cgroup
        # the OS user the JVM runs as (a tenant's; None: the peer's), in `work_dir` (its
        # spark-warehouse and the like), which it and its scratch dir are given
        self.user = user
        self.work_dir = work_dir
        # hears of every death of the JVM it did not ask for: its exit code and the end
        # of its log (where an OutOfMemoryError says so)
        self.on_exit = on_exit
        # the bearer token every client must show (in its environment, never on the
        # command line that `ps` shows): TOKEN_ENV for the server and the peer's clients
        self.token = token or secrets.token_urlsafe(32)
        self.env_pass = env_pass  # it runs users' SQL and UDFs: jm.policy.jobs.jobenv
        self.scratch_dir = scratch_dir  # its Spark local dir, emptied before each start
        # on a Spark cluster the server's UI (loopback) says whether it has executors
        self.on_cluster = not master.startswith("local")
        self.ui_port: Optional[int] = None  # a free one at every start
        self.waiting_after = waiting_after
        self.on_info = on_info
        self.info: Optional[dict] = None  # its application, and a note when it waits
        self.nice = nice
        self.on_ready_change = on_ready_change
        self.master = master
        self.log_dir = log_dir
        self.ready_file = ready_file
        self.driver_memory = driver_memory
        self.extra_conf = extra_conf
        self.log_level = log_level
        self.startup_timeout = startup_timeout
        self.warmup = warmup
        self.on_start = on_start
        self.proc: Optional[asyncio.subprocess.Process] = None
        self.ready = asyncio.Event()
        self.restarts = 0
        self.generation = 0       # bumps on every (re)start: jobs of an old JVM are stale
        self._task: Optional[asyncio.Task] = None
        self._monitor_task: Optional[asyncio.Task] = None
        self._closing = False

    @property
    def url(self) -> str:
        """Without the token (the clients have it in TOKEN_ENV). `localhost`: pyspark
        sends a token without TLS only to that name (gRPC local credentials)."""
        return f"sc://localhost:{self.port}"

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise())

    def _command(self) -> list[str]:
        home = spark_home()
        cmd = [os.path.join(home, "bin", "spark-class"), "org.apache.spark.deploy.SparkSubmit",
               "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
               "--master", self.master, "--driver-memory", self.driver_memory,
               "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
               "--conf", f"spark.connect.grpc.binding.port={self.port}",
               *self._ui_conf(),
               "--conf", "spark.driver.host=127.0.0.1",
               "--conf", "spark.driver.bindAddress=127.0.0.1"]
        for k, v in self.extra_conf.items():
            cmd += ["--conf", f"{k}={v}"]
        cmd.append("spark-internal")
        return cmd

    def _ui_conf(self) -> list[str]:
        if not self.on_cluster:
            return ["--conf", "spark.ui.enabled=false"]
        # bounded: a server answers many short statements (spark.conf.* may raise these)
        return ["--conf", "spark.ui.enabled=true", "--conf", f"spark.ui.port={self.ui_port}",
                "--conf", "spark.ui.retainedJobs=100", "--conf", "spark.ui.retainedStages=100",
                "--conf", "spark.sql.ui.retainedExecutions=100"]

    @property
    def ui_url(self) -> Optional[str]:
        return None if self.ui_port is None else f"http://127.0.0.1:{self.ui_port}"

    async def _get(self, http: aiohttp.ClientSession, path: str) -> Any:
        async with http.get(f"{self.ui_url}/api/v1/{path}") as resp:
            if resp.status != 200:
                return None
            return json.loads(await resp.read())

    async def _monitor(self, proc: asyncio.subprocess.Process) -> None:
        """While the server runs on a Spark cluster: its application and executors, from
        its UI every second; `on_info` hears when its application or waiting note
        changes (the JobMasters of connect-mode jobs report it)."""
        idle = IdleSince()
        last: Any = None
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
            while proc.returncode is None:
                info = None
                try:
                    apps = await self._get(http, "applications")
                    if apps:
                        info = server_info(self.master, self.ui_url, apps, await self._get(
                            http, f"applications/{apps[0]['id']}/executors"))
                except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, KeyError,
                        TypeError):
                    info = None
                if info is not None:
                    info.update(idle.note(info, time.monotonic(), self.waiting_after))
                    self.info = info
                    if (info["spark-app-id"], info.get("waiting")) != last:
                        last = (info["spark-app-id"], info.get("waiting"))
                        try:
                            self.on_info(info)
                        except Exception:
                            log.exception("handing on the Connect server's application")
                await asyncio.sleep(1.0)

    def _env(self) -> dict:
        env = child_environ(os.environ, self.env_pass)
        env[TOKEN_ENV] = self.token  # spark.connect.authenticate.token
        env["SPARK_HOME"] = spark_home()
        env["SPARK_LOCAL_IP"] = "127.0.0.1"
        # Python UDFs run in workers of this interpreter (pyarrow and the job's modules
        # are installed here; the system python3 may have neither)
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        env["JM_NICE"] = str(self.nice)
        env[PARENT_ENV] = str(os.getpid())  # jm.runtime.pdeathsig: the JVM dies with this peer
        env.setdefault("SPARK_LOG_DIR", self.log_dir)
        env.pop("SPARK_CONF_DIR", None)  # the class path: the jars alone (jvm_opts_env)
        log_config = os.path.join(
            spark_conf_dir(self.log_dir, self.log_level, engine=True), "log4j2.properties")
        env.update(local_dirs_env(env, self.extra_conf, self.scratch_dir))
        env.update(jvm_opts_env(env, self.scratch_dir, log_config, self.class_archive))
        return env

    async def _supervise(self) -> None:
        while not self._closing:
            self.ready.clear()
            try:
                os.unlink(self.ready_file)
            except FileNotFoundError:
                pass
            self.generation += 1
            os.makedirs(self.log_dir, exist_ok=True)
            if self.scratch_dir:  # what a JVM before this one left (killed with its peer)
                await asyncio.to_thread(shutil.rmtree, self.scratch_dir, True)
                os.makedirs(self.scratch_dir, exist_ok=True)  # (its java.io.tmpdir)
            out = open(os.path.join(self.log_dir, "spark-connect.log"), "ab")
            # (an engine's death is read from its last JVM's lines, a job's from its own's)
            out.write(run_mark(self.generation, time.strftime("%y/%m/%d %H:%M:%S")).encode())
            out.flush()
            started = time.monotonic()
            if self.on_cluster:
                self.ui_port = free_port()
            try:
                if self.user:
                    await asyncio.to_thread(self._give_dirs)
                self.proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "jm.runtime.pdeathsig", *self._command(),
                    stdout=out, stderr=out, env=self._env(), cwd=self.work_dir,
                    **({"user": self.user} if self.user else {}))
            except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
                self.restarts += 1
                log.error("Spark Connect server could not start: %s", exc)
                self._exited(None, str(exc), 0)
                await asyncio.sleep(min(5.0, 0.5 * self.restarts))  # a retry's pause
                continue
            finally:
                out.close()
            log.info("Spark Connect server starting on port %d (pid %d, master %s)",
                     self.port, self.proc.pid, self.master)
            oom_kills = await asyncio.to_thread(self._confine, self.proc.pid)
            self.on_start(self.proc.pid)
            self._monitor_task = (asyncio.create_task(self._monitor(self.proc))
                                  if self.on_cluster else None)
            while self.proc.returncode is None and not port_open("127.0.0.1", self.port):
                if time.monotonic() - started > self.startup_timeout:
                    log.error("Spark Connect server not up within %.0f s; restarting",
                              self.startup_timeout)
                    self.proc.kill()
                    break
                try:
                    await asyncio.wait_for(self.proc.wait(), 0.25)
                except asyncio.TimeoutError:
                    pass
            if self.proc.returncode is None:
                try:
                    await self.warmup(self)
                except Exception as exc:
                    log.warning("Spark warm-up query failed: %s", exc)
                if self.proc.returncode is None:
                    with open(self.ready_file, "w") as f:
                        f.write(self.url)
                    self.ready.set()
                    self.on_ready_change()
                    log.info("Spark Connect server ready at %s after %.1f s", self.url,
                             time.monotonic() - started)
            code = await self.proc.wait()
            await self._stop_monitor()
            self.ready.clear()
            self.on_ready_change()
            if self._closing:
                break
            self.restarts += 1
            log.error("Spark Connect server exited with code %s; restarting", code)
            over = self.cgroup.memory if self.cgroup is not None and await asyncio.to_thread(
                self.cgroup.oom_kills) > oom_kills else 0
            self._exited(code, await asyncio.to_thread(
                log_tail, os.path.join(self.log_dir, "spark-connect.log"), DEATH_LOG), over)
            await asyncio.sleep(min(5.0, 0.5 * self.restarts))

    def _confine(self, pid: int) -> int:
        """The JVM into its cgroup (made at its first start); the cgroup's OOM kills so
        far. A cgroup that cannot be made or joined is logged: the JVM runs without."""
        cg = self.cgroup
        if cg is None:
            return 0
        try:
            if not cg.dirs and not cg.create():
                log.warning("Spark Connect server runs without its cgroup: %s", cg.error)
                return 0
            cg.add(pid)
        except OSError as exc:
            log.warning("Spark Connect server runs without its cgroup: %s", exc)
        return cg.oom_kills()

    def _exited(self, code: Optional[int], text: str, over_limit: int) -> None:
        try:
            self.on_exit(code, text, over_limit)
        except Exception:
            log.exception("handing on the Connect server's exit")

    def _give_dirs(self) -> None:
        """The dirs the JVM writes (its work dir, its scratch dir) to its user; a user that
        does not exist is an error naming it (its engine never runs as the peer's user)."""
        import pwd
        try:
            pw = pwd.getpwnam(self.user)
        except KeyError:
            raise RuntimeError(f"UserNotFound: the OS user {self.user!r} of this engine does "
                               "not exist on this peer's host") from None
        for path in (self.work_dir, self.scratch_dir):
            if path:
                os.makedirs(path, exist_ok=True)
                os.chown(path, pw.pw_uid, pw.pw_gid)

    async def _stop_monitor(self) -> None:
        task, self._monitor_task = self._monitor_task, None
        if task is not None:
            task.cancel()
            await asyncio.wait({task}, timeout=5)
        self.info = None

    async def close(self) -> None:
        self._closing = True
        if self._task:  # first, so that it starts no new server meanwhile
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=5)
        await self._stop_monitor()
        if self.proc and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except asyncio.TimeoutError:
                self.proc.kill()
                try:
                    await asyncio.wait_for(self.proc.wait(), 5)
                except asyncio.TimeoutError:
                    log.error("Spark Connect server pid %d not reaped", self.proc.pid)
        try:
            os.unlink(self.ready_file)
        except FileNotFoundError:
            pass
        if self.cgroup is not None:
            await asyncio.to_thread(self.cgroup.remove)
