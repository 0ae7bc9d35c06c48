"""Supervision of the peer's own Spark Connect server (one JVM per peer).

The server is started from pyspark's own distribution (SPARK_HOME = the pyspark
package folder), bound to 127.0.0.1, with its output in the peer's log dir. When it
is up, a warm-up query runs through a job process (the peer itself never opens a
Spark channel), then the ready file is written; job processes wait for that file.
If the JVM dies it is started again.
"""
from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import random
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from typing import Any, Callable, Optional

import aiohttp

from jm.policy.jobenv import child_environ
from jm.runtime.sparkapp import IdleSince, local_dirs_env
from jm.runtime.zygote import PARENT_ENV


log = logging.getLogger("jm.spark")


def spark_home() -> str:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("pyspark is not installed")
    return list(spec.submodule_search_locations)[0]


TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # read by the server and pyspark's client


EPHEMERAL_RANGE = "/proc/sys/net/ipv4/ip_local_port_range"
LOWEST_PORT = 10000  # below: the usual fixed ports (REST 8081, Raft 6123, Spark's 7077...)


def ephemeral_start(text: str) -> int:
    """The first port of the kernel's ephemeral range (ip_local_port_range: "lo hi")."""
    return int(text.split()[0])


def free_port(host: str = "127.0.0.1", rnd: Optional[random.Random] = None) -> int:
    """A port free now, for a server started a moment later (a JVM binds it seconds
    after). Below the kernel's ephemeral range where there is room: a port that bind(0)
    handed out is handed out again to the next bind(0) or outgoing connection of any
    process, e.g. another peer's Spark driver or block manager, which then holds it while
    this peer's Connect server fails to bind and `port_open` sees the other one (seen in
    the chaos suite: a peer's Spark never became ready)."""
    try:
        with open(EPHEMERAL_RANGE) as f:
            start = ephemeral_start(f.read())
    except (OSError, ValueError, IndexError):
        start = 0
    rnd = rnd or random.Random()
    for _ in range(64 if start > LOWEST_PORT + 1000 else 0):
        port = rnd.randrange(LOWEST_PORT, start)
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def log_tail(path: str, size: int = 1024 * 1024) -> str:
    """The last `size` bytes of a log as text ("" when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def server_conf(master: str, conf: dict, cores: int, cpus: int = 0) -> dict:
    """The Connect server's Spark properties (pure): on a Spark cluster its application
    takes at most `cores` cores, so that the servers of several peers and the jobs' own
    applications all get some (a standalone application otherwise takes every core).
    Defaults for short statements come first; `spark.conf.*` (conf) overrides them."""
    out = dict(conf)
    if cores > 0 and not master.startswith("local"):
        out.setdefault("spark.cores.max", str(cores))
    for key, value in short_query_defaults(master, out, cpus or os.cpu_count() or 1).items():
        out.setdefault(key, value)
    return out


def short_query_defaults(master: str, conf: dict, cpus: int) -> dict:
    """Spark SQL settings for many short interactive statements (pure): adaptive execution
    (coalesces small shuffles at run time) and as many shuffle partitions as twice the
    cores the server has, when it knows them (Spark's 200 are meant for big jobs). A
    session's properties or a job's spark-conf override them."""
    out = {"spark.sql.adaptive.enabled": "true",
           "spark.sql.adaptive.coalescePartitions.enabled": "true"}
    slots = 0
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\s*\d+)?\])?", master.strip())
    if m:
        slots = cpus if m.group(1) == "*" else int(m.group(1) or 1)
    elif str(conf.get("spark.cores.max", "")).isdigit():
        slots = int(conf["spark.cores.max"])
    if slots > 0:
        out["spark.sql.shuffle.partitions"] = str(2 * slots)
    return out


def server_info(master: str, ui_url: str, apps: Any, executors: Any) -> Optional[dict]:
    """The server's application from its UI's REST answers (pure): its id, UI and how many
    executors it has (the driver is not one); None while it has no application."""
    if not isinstance(apps, list) or not apps or not isinstance(apps[0], dict):
        return None
    count = sum(1 for e in executors if isinstance(e, dict) and e.get("id") != "driver"
                ) if isinstance(executors, list) else 0
    return {"spark-app-id": str(apps[0].get("id")), "spark-ui": ui_url, "master": master,
            "executors": count, "shared": "the peer's Spark Connect server"}


def spark_conf_dir(log_dir: str, log_level: str,
                   info_logger: str = "org.apache.spark.sql.connect") -> str:
    """A SPARK_CONF_DIR for the JVMs a peer starts (its Connect server, jobs' drivers):
    Spark's log at `spark.log.level`, on stderr, with `info_logger` at INFO."""
    conf_dir = os.path.join(log_dir, "spark-conf")
    os.makedirs(conf_dir, exist_ok=True)
    path = os.path.join(conf_dir, "log4j2.properties")
    text = (f"rootLogger.level = {log_level.lower()}\n"
            "rootLogger.appenderRef.stdout.ref = console\n"
            "appender.console.type = Console\nappender.console.name = console\n"
            "appender.console.target = SYSTEM_ERR\n"
            "appender.console.layout.type = PatternLayout\n"
            "appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n\n"
            f"logger.info.name = {info_logger}\n"
            "logger.info.level = info\n")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return conf_dir


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
                 on_exit: Callable[[Optional[int], str], None] = lambda code, tail: None,
                 user: Optional[str] = None, work_dir: Optional[str] = None) -> None:
        self.port = port
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
        self.env_pass = env_pass  # it runs users' SQL and UDFs: jm.policy.jobenv
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
        conf_dir = spark_conf_dir(self.log_dir, self.log_level)
        env["SPARK_CONF_DIR"] = conf_dir
        env.update(local_dirs_env(env, self.extra_conf, self.scratch_dir))
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
            out = open(os.path.join(self.log_dir, "spark-connect.log"), "ab")
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
                self._exited(None, str(exc))
                await asyncio.sleep(min(5.0, 0.5 * self.restarts))  # a retry's pause
                continue
            finally:
                out.close()
            log.info("Spark Connect server starting on port %d (pid %d, master %s)",
                     self.port, self.proc.pid, self.master)
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
            self._exited(code, await asyncio.to_thread(
                log_tail, os.path.join(self.log_dir, "spark-connect.log")))
            await asyncio.sleep(min(5.0, 0.5 * self.restarts))

    def _exited(self, code: Optional[int], text: str) -> None:
        try:
            self.on_exit(code, text)
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
