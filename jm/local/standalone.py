"""A real Spark standalone cluster (one Master, N Workers) from pyspark's own
distribution, on 127.0.0.1, for tests and benchmarks: started with `spark-class` in the
foreground, each daemon in its own process group, stopped by pid (with the executors
its workers started).

    with StandaloneCluster(base_dir, workers=2) as sc:
        sc.master_url          # spark://127.0.0.1:PORT, for spark.master
        sc.status()            # the master's JSON: workers, activeapps, completedapps
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from typing import Any, Callable, Optional

from jm.runtime.ports import free_ports
from jm.runtime.sparkapp import jvm_opts_env
from jm.runtime.sparkjvm import spark_conf_dir, spark_home


def spark_env(**extra: str) -> dict:
    """The environment for Spark's own launch scripts (spark-class, spark-submit) on
    loopback: this interpreter for Python workers, and nothing of a Connect client or a
    pyspark gateway (which would turn a submitted application into something else)."""
    env = dict(os.environ, SPARK_HOME=spark_home(), SPARK_LOCAL_IP="127.0.0.1",
               PYSPARK_PYTHON=sys.executable, **extra)
    for key in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_SUBMIT_ARGS"):
        env.pop(key, None)
    return env


class StandaloneCluster:
    def __init__(self, base_dir: str, workers: int = 2, cores: int = 1,
                 memory: str = "1g", class_archive: Optional[str] = None) -> None:
        self.base = base_dir
        # a class-data archive of Spark's JVM (jm/runtime/classarchive.py) the daemons map
        self.class_archive = class_archive
        self.n_workers = workers
        self.cores = cores
        self.memory = memory
        ports = free_ports(2 + workers)
        self.master_port, self.master_ui = ports[0], ports[1]
        self.worker_uis = ports[2:]
        self.procs: list[subprocess.Popen] = []
        self.workers: dict[int, subprocess.Popen] = {}

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def ui_url(self) -> str:
        return f"http://127.0.0.1:{self.master_ui}"

    def _env(self) -> dict:
        # the log4j configuration as a file, not a SPARK_CONF_DIR on the class path: the
        # daemons' and their executors' class path is then the jars alone, which a
        # class-data archive (for the executors: spark.executor.extraJavaOptions) needs
        log_config = os.path.join(spark_conf_dir(self.base, "WARN", "org.apache.spark.deploy"),
                                  "log4j2.properties")
        env = spark_env(**jvm_opts_env(os.environ, None, log_config, self.class_archive,
                                       var="SPARK_DAEMON_JAVA_OPTS"),
                        SPARK_LOG_DIR=os.path.join(self.base, "logs"),
                        SPARK_WORKER_DIR=os.path.join(self.base, "work"),
                        # the executors' scratch (blockmgr-*, spark-*): here, not in /tmp
                        SPARK_LOCAL_DIRS=os.path.join(self.base, "local"))
        env.pop("SPARK_CONF_DIR", None)
        return env

    def _daemon(self, name: str, args: list[str]) -> None:
        os.makedirs(os.path.join(self.base, "logs"), exist_ok=True)
        with open(os.path.join(self.base, "logs", f"{name}.log"), "ab") as out:
            self.procs.append(subprocess.Popen(
                [os.path.join(spark_home(), "bin", "spark-class"), *args],
                stdout=out, stderr=out, env=self._env(), start_new_session=True))

    def start(self, timeout: float = 120.0) -> "StandaloneCluster":
        try:
            self._daemon("master", ["org.apache.spark.deploy.master.Master",
                                    "--host", "127.0.0.1", "--port", str(self.master_port),
                                    "--webui-port", str(self.master_ui)])
            self.wait(lambda: self.status().get("status") == "ALIVE", timeout,
                      "the Spark master to start")
            for i in range(self.n_workers):
                self.start_worker(i)
            self.wait(lambda: self.alive_workers() == self.n_workers, timeout,
                      f"{self.n_workers} Spark workers to register")
        except BaseException:
            self.stop()
            raise
        return self

    def start_worker(self, i: int) -> None:
        """Start worker `i` (again): it registers with the master by itself."""
        self._daemon(f"worker-{i}", ["org.apache.spark.deploy.worker.Worker",
                                     self.master_url, "--host", "127.0.0.1",
                                     "--cores", str(self.cores), "--memory", self.memory,
                                     "--webui-port", str(self.worker_uis[i]),
                                     "--work-dir", os.path.join(self.base, f"work-{i}")])
        self.workers[i] = self.procs[-1]

    def kill_worker(self, i: int) -> None:
        """SIGKILL worker `i` and its executors (its process group), as a lost host."""
        proc = self.workers.pop(i)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        proc.wait(10)
        self.procs.remove(proc)

    def wait(self, cond: Callable[[], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = cond()
            except (OSError, ValueError):
                value = None
            if value:
                return value
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark daemon exited with code {p.returncode} "
                                       f"while waiting for {what} (logs in {self.base}/logs)")
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what} (logs in {self.base}/logs)")
            time.sleep(0.2)

    def _json(self, url: str) -> dict:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return json.loads(resp.read())

    def status(self) -> dict:
        """The master's JSON status (workers, activeapps, completedapps)."""
        return self._json(f"{self.ui_url}/json/")

    def alive_workers(self) -> int:
        return sum(1 for w in self.status().get("workers", []) if w.get("state") == "ALIVE")

    def active_apps(self, name: Optional[str] = None) -> list[dict]:
        apps = self.status().get("activeapps", [])
        return [a for a in apps if name is None or a.get("name") == name]

    def executors_of(self, app_id: str) -> list[dict]:
        """Executors the workers ran for an application (running or finished)."""
        found = []
        for ui in self.worker_uis:
            w = self._json(f"http://127.0.0.1:{ui}/json/")
            for e in w.get("executors", []) + w.get("finishedexecutors", []):
                if e.get("appid") == app_id:
                    found.append(dict(e, worker=w.get("id")))
        return found

    def stop(self) -> None:
        """Kill every daemon's process group (a worker's executors are in its group)."""
        for p in reversed(self.procs):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                pass
        self.procs = []
        self.workers = {}

    def pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
