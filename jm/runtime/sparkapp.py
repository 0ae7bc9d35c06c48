"""Application mode inside a job process: the job's own Spark driver (classic mode), or
its own session on the peer's Spark Connect server (connect mode), and the Spark
application's details for the JobMaster.

Classic mode does what spark-submit does for a Python application in client deploy mode,
with the roles turned around: the job process launches the driver JVM (pyspark's own
gateway launch, `pyspark-shell` with the cluster's master and the job's properties in
PYSPARK_SUBMIT_ARGS) from its main thread before the user's code runs, so that
`SparkSession.builder.getOrCreate()` anywhere in the code returns a session of that one
application. The JVM is fenced with the attempt:
- it gets PR_SET_PDEATHSIG, so it dies the moment its job process dies (also when the
  peer, the zygote and the job process are SIGKILLed in one go);
- it stays in the job process's process group, which the zygote kills when the lease runs
  out and before it reaps the job process;
- at the end of the attempt the runner stops the SparkContext (the application ends at
  the master) and waits for the JVM to exit.
"""
from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import threading
import time
from typing import Any, Callable, Optional

from jm.policy.jobs import runparams
from jm.policy.jobs.runparams import RunParams

INFO_FILE = "spark.json"   # in the attempt's run dir; read by the JobMaster
SCRATCH = runparams.SCRATCH  # a driver JVM's Spark local dir, in its attempt's run dir
JVM_EXIT_WAIT = 10.0       # seconds the runner waits for its driver JVM to exit


def submit_args(master: str, name: str, conf: dict, pyfiles: list[str]) -> list[str]:
    """spark-submit arguments for the job's driver (pure)."""
    args = ["--master", master, "--name", name]
    for key in sorted(conf):
        args += ["--conf", f"{key}={conf[key]}"]
    shipped = [p for p in pyfiles if p.endswith((".py", ".zip", ".egg"))]
    if shipped:
        args += ["--py-files", ",".join(shipped)]
    return args + ["pyspark-shell"]


def driver_conf(params: RunParams) -> dict:
    """The Spark properties of a classic job's application: the cluster's defaults, then
    the job's own, then what the cluster needs (pure)."""
    conf = {"spark.ui.port": "0",  # many drivers on one host: no fight over 4040
            "spark.ui.showConsoleProgress": "false",  # the output goes to a log file
            "spark.driver.host": params.driver_host or "127.0.0.1"}
    conf.update(params.spark_defaults)
    conf.update(params.spark_conf)
    conf["spark.jm.job-id"] = params.job_id
    conf["spark.jm.attempt"] = str(params.attempt)
    return conf


def local_dirs_env(env: Any, conf: dict, scratch: Optional[str]) -> dict:
    """Pure: SPARK_LOCAL_DIRS for a driver JVM a peer starts: a scratch folder of its own
    (shuffle spills, broadcast blocks, added files), which the peer empties once the JVM
    is gone, so a JVM killed by a fence leaves nothing in /tmp. Nothing if the operator
    chose the local dirs (SPARK_LOCAL_DIRS in the environment, spark.local.dir)."""
    if not scratch or env.get("SPARK_LOCAL_DIRS") or conf.get("spark.local.dir"):
        return {}
    return {"SPARK_LOCAL_DIRS": scratch}


def jvm_opts_env(env: Any, scratch: Optional[str], log_config: Optional[str] = None,
                 class_archive: Optional[str] = None, var: str = "SPARK_SUBMIT_OPTS") -> dict:
    """Pure: SPARK_SUBMIT_OPTS (or `var`: a standalone daemon's SPARK_DAEMON_JAVA_OPTS) for
    a JVM the peer starts, each option unless the operator chose it (in that variable):
    its scratch folder as java.io.tmpdir (Spark Connect's `artifacts-<uuid>` folders,
    extracted native libraries), so a JVM killed by a fence leaves nothing in /tmp either;
    its log4j configuration as a file, not a SPARK_CONF_DIR on its class path, so the class
    path is the jars alone and a class-data archive (`spark.class-archive`,
    jm/runtime/classarchive.py) made of them maps."""
    opts = env.get(var, "")
    extra = [f"{flag}{value}" for flag, value in (
        ("-Djava.io.tmpdir=", scratch), ("-Dlog4j2.configurationFile=", log_config),
        ("-XX:SharedArchiveFile=", class_archive)) if value and flag not in opts]
    if not extra:
        return {}
    return {var: " ".join([opts, *extra]).strip()}


def _fence_gateway_launch() -> None:
    """Make pyspark's gateway launch give the driver JVM a parent-death signal (pyspark
    replaces any preexec_fn passed to it, so its Popen is wrapped)."""
    import ctypes
    from pyspark import java_gateway
    if getattr(java_gateway.Popen, "_jm_fenced", False):
        return
    original = java_gateway.Popen
    # resolved here: the forked child only calls it (no import or dlopen between fork
    # and exec, where another thread may have held a lock)
    prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl

    def popen(cmd, **kwargs):
        before = kwargs.get("preexec_fn")

        def preexec():
            if before is not None:
                before()
            prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        kwargs["preexec_fn"] = preexec
        return original(cmd, **kwargs)
    popen._jm_fenced = True  # type: ignore[attr-defined]
    java_gateway.Popen = popen


def start_driver(params: RunParams, name: str, pyfiles: list[str]) -> None:
    """Launch the job's driver JVM now, from the calling (main) thread."""
    master = params.spark_master or "local[*]"
    conf = driver_conf(params)
    args = submit_args(master, name, conf, pyfiles)
    os.environ["PYSPARK_SUBMIT_ARGS"] = shlex.join(args)
    os.environ.update(local_dirs_env(os.environ, conf, params.scratch_dir))
    for key in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_GATEWAY_PORT",
                "PYSPARK_GATEWAY_SECRET"):
        os.environ.pop(key, None)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", params.driver_host or "127.0.0.1")
    log_config = None  # the operator's SPARK_CONF_DIR (its log4j2.properties) wins
    if params.spark_conf_dir and "SPARK_CONF_DIR" not in os.environ:
        log_config = os.path.join(params.spark_conf_dir, "log4j2.properties")
    os.environ.update(jvm_opts_env(os.environ, None, log_config, params.class_archive))
    _fence_gateway_launch()
    from pyspark import SparkContext
    try:
        SparkContext._ensure_initialized()
    except Exception as exc:  # say why in the job's exceptions, not only in its log
        raise DriverStartError(f"the Spark driver did not start ({exc}); its JVM said:\n"
                               f"{_log_tail(params.log_path)}") from None


class DriverStartError(RuntimeError):
    pass


def _log_tail(path: Optional[str], limit: int = 1200) -> str:
    """The end of the attempt's log, where the driver JVM wrote its error."""
    if not path:
        return "(no log)"
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", "replace").strip() or "(nothing)"
    except OSError as exc:
        return f"(its log could not be read: {exc})"


def stop_driver() -> None:
    """Stop the application (if the code left it running) and wait for the JVM to exit."""
    try:
        from pyspark import SparkContext
    except Exception:
        return
    sc = SparkContext._active_spark_context
    if sc is not None:
        try:
            sc.stop()
        except Exception as exc:
            print(f"[jm] stopping the SparkContext failed: {exc}", file=sys.stderr, flush=True)
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None) if gateway is not None else None
    if proc is None:
        return
    try:
        gateway.shutdown()
    except Exception:
        pass
    try:
        proc.stdin.close()  # the gateway server exits on EOF
    except Exception:
        pass
    try:
        proc.wait(JVM_EXIT_WAIT)
    except Exception:
        proc.kill()
        proc.wait()


def interrupt_driver() -> bool:
    """On a graceful stop of a script: cancel the application's Spark jobs and raise
    KeyboardInterrupt in the code, as Ctrl-C does under spark-submit. False if there is
    no classic driver."""
    try:
        from pyspark import SparkContext
    except Exception:
        return False
    sc = SparkContext._active_spark_context
    if sc is None:
        return False
    try:
        sc.cancelAllJobs()
    except Exception:
        pass
    return True


def classic_session():
    from pyspark.sql import SparkSession
    return SparkSession.builder.getOrCreate()


def app_info() -> Optional[dict]:
    """The running classic application's id, UI and executors, or None before it exists."""
    from pyspark import SparkContext
    sc = SparkContext._active_spark_context
    app_id = getattr(sc, "applicationId", None) if sc is not None else None
    if not app_id:
        return None
    info: dict[str, Any] = {"spark-app-id": app_id, "master": sc.master}
    try:
        info["spark-ui"] = sc.uiWebUrl
    except Exception:
        pass
    if not sc.master.startswith("local"):
        try:  # the driver is one of the block managers
            info["executors"] = max(0, sc._jsc.sc().getExecutorMemoryStatus().size() - 1)
        except Exception:
            pass
    return info


def write_info(path: str, info: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.replace(tmp, path)


class InfoWatcher(threading.Thread):
    """Writes the application's details to the run dir when they appear or change (the
    JobMaster reports them for the attempt), and says when no executor was granted."""

    def __init__(self, path: str, source: Callable[[], Optional[dict]], waiting_after: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(name="jm-spark-info", daemon=True)
        self.path = path
        self.source = source
        self.waiting_after = waiting_after
        self.clock = clock
        self.done = threading.Event()
        self._last: Optional[dict] = None
        self._idle = IdleSince()

    def poll(self) -> None:
        try:
            info = self.source()
        except Exception:
            return
        if info is None:
            return
        info = dict(info, **self._idle.note(info, self.clock(), self.waiting_after))
        if info != self._last:
            write_info(self.path, info)
            self._last = info

    def run(self) -> None:
        delay = 0.1
        while not self.done.wait(delay):
            self.poll()
            delay = 0.1 if self._last is None else 1.0


class IdleSince:
    """Since when an application has had no executor (pure: the clock is given); a new
    application starts afresh."""

    def __init__(self) -> None:
        self.app: Optional[str] = None
        self.since: Optional[float] = None

    def note(self, info: dict, now: float, after: float) -> dict:
        """The waiting note for `info` observed at `now` ({} while it has executors)."""
        if info.get("spark-app-id") != self.app:
            self.app, self.since = info.get("spark-app-id"), None
        if info.get("executors", 1) > 0:
            self.since = None
            return {}
        if self.since is None:
            self.since = now
        return waiting(info, now - self.since, after)


def waiting(info: dict, age: float, after: float) -> dict:
    """A 'waiting' note when a cluster application has had no executor for `after`
    seconds (pure). Its text does not change while it waits (one report, not one a
    second)."""
    if info.get("executors", 1) > 0 or age < after:
        return {}
    return {"waiting": f"no executor granted by {info.get('master')} for {int(after)} s "
                       "or more: the Spark cluster has no free cores or memory for this "
                       "application (see its master's UI; spark.cores.max and "
                       "spark.executor.memory size what it asks for)"}
