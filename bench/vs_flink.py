"""Side-by-side benchmark: our peer-to-peer JobManager cluster against Apache Flink 2.3's
standby-JobManager HA (ZooKeeper), in one invocation, on 127.0.0.1 only (issue 6).

    .venv/bin/python bench/vs_flink.py                 # set-up + full run (~20 min on 2 cores)
    .venv/bin/python bench/vs_flink.py --quick         # smoke run: 1 trial, 4 jobs, few submissions
    .venv/bin/python bench/vs_flink.py --skip-setup    # reuse bench/.flink (no download/compile)
    .venv/bin/python bench/vs_flink.py --trials 5 --ours-trials 20  # more trials

Set-up (skipped with --skip-setup; every step is also skipped when its output exists):
  * `pip download --no-deps apache-flink==2.3.0 apache-flink-libraries==2.3.0` into
    bench/.flink/wheels, both wheels unzipped into bench/.flink/home: pyflink/bin,
    pyflink/lib and pyflink/conf form a Flink home (bench/.flink/ is git-ignored; no Flink
    code is committed);
  * bench/flink_job/BenchJob.java compiled with javac against <home>/lib/* and packaged
    with jar into bench/.flink/job/bench-job.jar: `stream` is a throttled unbounded source
    (4 records/s) into a discarding sink with checkpoints every 5 s, `batch` a job that
    finishes at once.

Systems (one after the other):
  * Flink: ZooKeeper (FlinkZooKeeperQuorumPeer from flink-dist, standalone, on a free
    loopback port), 2 JobManagers (leader + standby, each with its own conf dir, RPC and
    REST port), 1 TaskManager with 16 slots, HA storage and checkpoints under
    bench/.flink/run/. Profiles: "default" (Flink's default timeouts: heartbeat 10 s / 50 s,
    ZooKeeper session 60 s; zoo.cfg allows sessions up to 60 s so that the client's default
    is what is used) and "tuned" (heartbeat.interval 1 s, heartbeat.timeout 5 s,
    high-availability.zookeeper.client.session-timeout 6 s, connection-timeout 3 s).
    Every process runs in the foreground under this script (jobmanager.sh / taskmanager.sh
    start-foreground exec the JVM, so the child's PID is the JVM's).
  * ours: 3 peers with bench.common.BenchCluster (spark.connect.embedded false,
    jobmanager.executor.preload none, restart-strategy none, as bench/failover.py), profiles
    "default" and "fast" (bench.failover.PROFILES). The long-running job is the probe job
    (chaos/probe.py), the trivial job bench/trivial_job.py. A fresh cluster per trial, so
    every trial starts from K jobs spread over the 3 peers.

Measurements:
  1. kill -9 of the leader with K streaming jobs (K = 4, 12): time from the kill until every
     job RUNNING again (Flink: every job RUNNING with all its tasks running in the
     surviving JobManager's /jobs/overview, polled every 0.1 s; ours: the cluster's RUNNING
     timestamps of the moved jobs), and jobs restarted (Flink: jobs whose tasks started
     after the kill; ours: the leader's jobs moved, plus restarts of every other job, which
     must be 0).
  2. kill -9 of a non-leader process holding jobs: Flink's standby JobManager (nothing
     moves: the jobs must stay RUNNING through an observation window), our follower peer
     with most jobs (its jobs move).
  3. REST submission of trivial jobs, 1 and 8 closed-loop clients: submits/s, completed
     jobs/s (first submission -> last job ended), p50/p99 submit latency. Flink: the jar is
     uploaded once to each JobManager (POST /jars/upload), then POST /jars/<id>/run per job,
     clients alternating between both JobManagers; ours: POST /jobs with X-Request-Id to
     the 3 peers in turn.
  4. RSS of the control-plane processes: Flink JobManager leader and standby; our peer
     process without its children (zygote, job processes), idle and with 12 jobs running.

Outputs (default --out): bench/results/vs_flink.md (tables, also printed), vs_flink.json
(raw numbers), vs_flink.png (bar chart). Every process this script starts is stopped on
every exit path (finally, SIGTERM, SIGINT) and checked to be gone at the end.
"""
from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
import zipfile

import psutil
import yaml

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.common import ROOT, BenchCluster, _interrupt, get, median, pct, wait_until  # noqa: E402
from bench.failover import PROFILES, kill_peer, nodes, post, snapshot  # noqa: E402
from bench.submit import JOB as TRIVIAL_JOB  # noqa: E402
from jm.local.localcluster import free_ports  # noqa: E402

FLINK_VERSION = "2.3.0"
FLINK_DIR = os.path.join(ROOT, "bench", ".flink")
WHEELS = os.path.join(FLINK_DIR, "wheels")
HOME = os.path.join(FLINK_DIR, "home", "pyflink")
JOB_SRC = os.path.join(ROOT, "bench", "flink_job")
JOB_JAR = os.path.join(FLINK_DIR, "job", "bench-job.jar")
ENTRY = "jmbench.BenchJob"
RESULTS = os.path.join(ROOT, "bench", "results")

FLINK_PROFILES = {
    "default": {},
    "tuned": {"heartbeat.interval": "1 s", "heartbeat.timeout": "5 s",
              "high-availability.zookeeper.client.session-timeout": "6 s",
              # Curator warns when the connection timeout (default 15 s) exceeds the session
              "high-availability.zookeeper.client.connection-timeout": "3 s"},
}
OUR_SETTINGS = {"spark.connect.embedded": False, "jobmanager.executor.preload": "none",
                "jobmanager.slots": 16, "restart-strategy.type": "none"}
STARTED: list[subprocess.Popen] = []  # every process this script started directly
RUN_MARKERS: list[str] = []  # paths that appear in the command line of every process we start


def log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


# ---------------------------------------------------------------------------------- set-up

def setup() -> None:
    wheels = [f"apache_flink-{FLINK_VERSION}-", f"apache_flink_libraries-{FLINK_VERSION}-"]
    have = os.listdir(WHEELS) if os.path.isdir(WHEELS) else []
    if not all(any(f.startswith(w) and f.endswith(".whl") for f in have) for w in wheels):
        log("downloading the Apache Flink wheels from PyPI")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                        f"apache-flink=={FLINK_VERSION}",
                        f"apache-flink-libraries=={FLINK_VERSION}", "-d", WHEELS], check=True)
    if not os.path.exists(os.path.join(HOME, "bin", "jobmanager.sh")) or \
            not os.path.isdir(os.path.join(HOME, "lib")):
        log("unzipping the wheels into bench/.flink/home")
        for f in sorted(os.listdir(WHEELS)):
            if any(f.startswith(w) for w in wheels) and f.endswith(".whl"):
                with zipfile.ZipFile(os.path.join(WHEELS, f)) as z:
                    for info in z.infolist():
                        path = z.extract(info, os.path.dirname(HOME))
                        mode = info.external_attr >> 16
                        if mode and not info.is_dir():
                            os.chmod(path, mode & 0o777)
    for script in ("jobmanager.sh", "taskmanager.sh", "flink", "config.sh", "flink-console.sh",
                   "bash-java-utils.sh", "config-parser-utils.sh", "find-flink-home.sh"):
        p = os.path.join(HOME, "bin", script)
        if os.path.exists(p):
            os.chmod(p, 0o755)
    sources = [os.path.join(JOB_SRC, f) for f in os.listdir(JOB_SRC) if f.endswith(".java")]
    if not os.path.exists(JOB_JAR) or \
            os.path.getmtime(JOB_JAR) < max(os.path.getmtime(s) for s in sources):
        log("compiling bench/flink_job with javac")
        classes = os.path.join(FLINK_DIR, "job", "classes")
        shutil.rmtree(classes, ignore_errors=True)
        os.makedirs(classes)
        subprocess.run(["javac", "-nowarn", "-cp", os.path.join(HOME, "lib", "*"),
                        "-d", classes, *sources], check=True)
        subprocess.run(["jar", "cfe", JOB_JAR + ".tmp", ENTRY, "-C", classes, "."], check=True)
        os.replace(JOB_JAR + ".tmp", JOB_JAR)


def check_setup() -> None:
    for p in (os.path.join(HOME, "bin", "jobmanager.sh"), os.path.join(HOME, "lib"), JOB_JAR):
        if not os.path.exists(p):
            raise SystemExit(f"vs_flink: {p} missing: run without --skip-setup once")


# ------------------------------------------------------------------------------- processes

def _die_with_parent() -> None:
    # a JVM outlives a SIGKILLed benchmark otherwise: PR_SET_PDEATHSIG survives exec
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)


def spawn(argv: list[str], env: dict, out: str) -> subprocess.Popen:
    with open(out, "ab") as f:
        p = subprocess.Popen(argv, env=env, stdout=f, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True,
                             preexec_fn=_die_with_parent, cwd=os.path.dirname(out))
    STARTED.append(p)
    return p


def stop_proc(p: subprocess.Popen | None, grace: float = 10) -> None:
    """SIGTERM, then SIGKILL after `grace` s: the process and its process group (its own
    session), by PID only."""
    if p is None:
        return
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(p.pid, signal.SIGKILL)  # anything left in its group
    except (ProcessLookupError, PermissionError):
        pass
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        pass


def leftovers() -> list[str]:
    """Processes still alive that this script started: by PID, or because their command
    line names one of this run's directories (JVMs, peers, zygotes)."""
    out = []
    ours = {p.pid for p in STARTED if p.poll() is None}  # not reaped yet: still our child
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.pid == os.getpid():
                continue
            cmd = " ".join(proc.info["cmdline"] or [])
            if proc.pid in ours or any(m in cmd for m in RUN_MARKERS):
                out.append(f"{proc.pid} {cmd[:160]}")
        except psutil.Error:
            pass
    return out


def rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2 ** 20


# ----------------------------------------------------------------------------------- HTTP

def http_json(url: str, body: dict | None = None, timeout: float = 5, method: str | None = None,
              data: bytes | None = None, headers: dict | None = None) -> dict:
    if body is not None:
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", **(headers or {})}
    req = urllib.request.Request(url, data=data, headers=headers or {},
                                 method=method or ("POST" if data is not None else "GET"))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"{url}: HTTP {exc.code}: {exc.read()[:300]!r}") from None


def timed(fn):
    """Wrap a wait_until predicate so that the wall time at which the successful check
    was sent is kept in .at (the state held at the latest then)."""
    box = {"at": None}

    def check():
        t = time.time()
        v = fn()
        if v:
            box["at"] = t
        return v
    return check, box


async def closed_loop(post_one, n: int, clients: int) -> dict:
    """n submissions by `clients` closed-loop clients; post_one(session, i) -> job id."""
    import aiohttp
    counter = iter(range(n))
    lat, ids, errors = [], [], []

    async def client(session) -> None:
        for i in counter:
            t0 = time.perf_counter()
            try:
                ids.append(await post_one(session, i))
                lat.append(time.perf_counter() - t0)
            except Exception as exc:  # noqa: BLE001 - counted, reported
                errors.append(repr(exc)[:200])

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=120)) as session:
        t_start = time.time()
        t0 = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(clients)))
        elapsed = time.perf_counter() - t0
    return {"clients": clients, "submitted": len(ids), "errors": len(errors),
            "error_samples": errors[:3], "elapsed_s": elapsed,
            "submits_per_s": len(ids) / elapsed, "p50_ms": pct(lat, 50) * 1000,
            "p99_ms": pct(lat, 99) * 1000, "ids": ids, "t_start": t_start}


def wait_ended(fetch, ids: list[str], what: str, **kw) -> dict:
    """Poll fetch() (job id -> overview row) until every job of `ids` has ended."""
    final = {"FINISHED", "FAILED", "CANCELED"}

    def check():
        rows = fetch()
        return rows if all(j in rows and rows[j]["state"] in final for j in ids) else None
    return wait_until(check, 300, what, interval=0.3, **kw)


def completion(rows: dict, ids: list[str], t_start: float) -> dict:
    """Completed jobs/s: FINISHED jobs over first submission -> last job ended (the
    systems' own end-time)."""
    done = [rows[j] for j in ids]
    finished = sum(1 for r in done if r["state"] == "FINISHED")
    last_end = max(r["end-time"] for r in done) / 1000
    return {"finished": finished, "failed": len(done) - finished,
            "completed_per_s": finished / (last_end - t_start)}


# ---------------------------------------------------------------------------------- Flink

def _flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


class FlinkHA:
    """ZooKeeper + 2 JobManagers + 1 TaskManager, every JVM a child of this script."""

    def __init__(self, base: str, profile: str, slots: int = 16) -> None:
        self.base, self.profile = base, profile
        os.makedirs(base, exist_ok=True)
        RUN_MARKERS.append(base)
        (self.zk_port, rpc0, rest0, rpc1, rest1) = free_ports(5)
        self.rpc, self.rest = [rpc0, rpc1], [rest0, rest1]
        self.urls = [f"http://127.0.0.1:{p}" for p in self.rest]
        self.jm: list[subprocess.Popen | None] = [None, None]
        self.tm: subprocess.Popen | None = None
        self.zk: subprocess.Popen | None = None
        self.leader, self.standby = 0, 1
        self.jar_ids: dict[int, str] = {}
        with open(os.path.join(HOME, "conf", "config.yaml")) as f:
            shipped = _flatten(yaml.safe_load(f))
        self.settings = {
            **shipped,
            "jobmanager.rpc.address": "127.0.0.1", "jobmanager.bind-host": "127.0.0.1",
            "rest.address": "127.0.0.1", "rest.bind-address": "127.0.0.1",
            "taskmanager.host": "127.0.0.1", "taskmanager.bind-host": "127.0.0.1",
            "taskmanager.numberOfTaskSlots": slots, "parallelism.default": 1,
            "high-availability.type": "zookeeper",
            "high-availability.storageDir": "file://" + os.path.join(base, "ha"),
            "high-availability.zookeeper.quorum": f"127.0.0.1:{self.zk_port}",
            "high-availability.zookeeper.path.root": "/flink",
            "high-availability.cluster-id": "/vs-flink",
            "execution.checkpointing.dir": "file://" + os.path.join(base, "checkpoints"),
            **FLINK_PROFILES[profile],
        }

    # -- configuration and processes
    def _conf(self, name: str, extra: dict) -> tuple[str, dict]:
        d = os.path.join(self.base, name)
        conf = os.path.join(d, "conf")
        if not os.path.isdir(conf):
            shutil.copytree(os.path.join(HOME, "conf"), conf)
        for sub in ("log", "tmp", "upload", "pid"):
            os.makedirs(os.path.join(d, sub), exist_ok=True)
        values = {**self.settings, "io.tmp.dirs": os.path.join(d, "tmp"), **extra}
        with open(os.path.join(conf, "config.yaml"), "w") as f:
            yaml.safe_dump(values, f, default_flow_style=False)
        env = dict(os.environ, FLINK_CONF_DIR=conf, FLINK_LOG_DIR=os.path.join(d, "log"),
                   FLINK_PID_DIR=os.path.join(d, "pid"))
        env.pop("FLINK_HOME", None)
        return d, env

    def start_zk(self) -> None:
        d = os.path.join(self.base, "zk")
        os.makedirs(os.path.join(d, "data"), exist_ok=True)
        with open(os.path.join(d, "data", "myid"), "w") as f:
            f.write("1\n")
        cfg = os.path.join(d, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(f"tickTime=2000\ninitLimit=10\nsyncLimit=5\n"
                    f"dataDir={os.path.join(d, 'data')}\nclientPort={self.zk_port}\n"
                    f"clientPortAddress=127.0.0.1\n"
                    # sessions up to Flink's default client session timeout (60 s)
                    f"maxSessionTimeout=60000\nadmin.enableServer=false\n")
        self.zk = spawn(["java", "-Xmx256m", "-Dzookeeper.admin.enableServer=false",
                         f"-Dlog4j.configurationFile=file:{HOME}/conf/log4j-console.properties",
                         f"-Dlog.file={d}/zookeeper.log",
                         "-cp", os.path.join(HOME, "lib", "*"),
                         "org.apache.flink.runtime.zookeeper.FlinkZooKeeperQuorumPeer",
                         "--zkConfigFile", cfg, "--peerId", "1"], dict(os.environ),
                        os.path.join(d, "console.out"))

        def zk_up():
            if self.zk.poll() is not None:
                raise SystemExit(f"ZooKeeper exited ({self.zk.returncode}): see {d}")
            socket.create_connection(("127.0.0.1", self.zk_port), timeout=1).close()
            return True
        wait_until(zk_up, 120, "ZooKeeper up", interval=0.2, errors=(OSError,))

    def start_jm(self, i: int) -> None:
        d, env = self._conf(f"jm{i}", {"jobmanager.rpc.port": self.rpc[i],
                                       "rest.port": self.rest[i],
                                       "web.upload.dir": os.path.join(self.base, f"jm{i}",
                                                                      "upload")})
        self.jm[i] = spawn([os.path.join(HOME, "bin", "jobmanager.sh"), "start-foreground"],
                           env, os.path.join(d, "console.out"))
        self.jar_ids.pop(i, None)

    def wait_jm(self, i: int, timeout: float = 180) -> None:
        """Its REST answers /overview (from the leading Dispatcher / ResourceManager)."""
        def up():
            if self.jm[i].poll() is not None:
                raise SystemExit(f"JobManager {i} exited ({self.jm[i].returncode}): "
                                 f"see {self.base}/jm{i}")
            return "taskmanagers" in http_json(self.urls[i] + "/overview", timeout=3)
        wait_until(up, timeout, f"Flink JobManager {i} REST", interval=0.3,
                   errors=(OSError, RuntimeError, ValueError))

    def start(self) -> None:
        t0 = time.monotonic()
        self.start_zk()
        self.start_jm(0)
        self.wait_jm(0)  # the only contender: it becomes the leader
        self.start_jm(1)
        self.wait_jm(1)
        d, env = self._conf("tm", {})
        self.tm = spawn([os.path.join(HOME, "bin", "taskmanager.sh"), "start-foreground"],
                        env, os.path.join(d, "console.out"))
        wait_until(lambda: http_json(self.urls[0] + "/overview", timeout=3)["slots-total"]
                   >= self.settings["taskmanager.numberOfTaskSlots"], 180,
                   "TaskManager registered", interval=0.3, errors=(OSError, RuntimeError))
        self.leader, self.standby = 0, 1
        self.start_s = time.monotonic() - t0
        self.check_leader()

    def granted(self, i: int) -> int:
        """How often JobManager i's logs say its Dispatcher was granted leadership."""
        n = 0
        logdir = os.path.join(self.base, f"jm{i}", "log")
        for f in os.listdir(logdir):
            if f.endswith(".log"):
                with open(os.path.join(logdir, f), errors="replace") as fh:
                    n += sum(1 for line in fh if "DefaultDispatcherRunner" in line
                             and "granted leadership" in line)
        return n

    def check_leader(self) -> None:
        # the leader's logs say so; the standby's current process never was granted it
        # (a restarted process writes a new log file, so count since its last start)
        if not self.granted(self.leader):
            log(f"warning: JobManager {self.leader} logs no granted leadership")

    def stop(self) -> None:
        stop_proc(self.tm)
        for p in self.jm:
            stop_proc(p)
        stop_proc(self.zk)

    def kill_jm(self, i: int) -> float:
        t = time.time()
        os.kill(self.jm[i].pid, signal.SIGKILL)
        self.jm[i].wait(30)
        return t

    # -- REST
    def upload(self, i: int) -> str:
        if i not in self.jar_ids:
            boundary = uuid.uuid4().hex
            with open(JOB_JAR, "rb") as f:
                content = f.read()
            body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"jarfile\"; "
                    f"filename=\"bench-job.jar\"\r\nContent-Type: application/x-java-archive"
                    f"\r\n\r\n").encode() + content + f"\r\n--{boundary}--\r\n".encode()
            r = http_json(self.urls[i] + "/jars/upload", data=body, timeout=60,
                          headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
            self.jar_ids[i] = os.path.basename(r["filename"])
        return self.jar_ids[i]

    def run_stream(self, name: str) -> str:
        i = self.leader
        return http_json(f"{self.urls[i]}/jars/{self.upload(i)}/run",
                         {"entryClass": ENTRY, "programArgsList": ["stream", name, "4"]},
                         timeout=120)["jobid"]

    def overview(self, i: int, timeout: float = 3) -> dict:
        return {r["jid"]: r for r in http_json(self.urls[i] + "/jobs/overview",
                                               timeout=timeout)["jobs"]}

    def all_running(self, i: int, jids: list[str]) -> bool:
        rows = self.overview(i)
        return all(j in rows and rows[j]["state"] == "RUNNING"
                   and rows[j]["tasks"]["running"] == rows[j]["tasks"]["total"] for j in jids)

    def task_start_ms(self, i: int, jid: str) -> int:
        job = http_json(f"{self.urls[i]}/jobs/{jid}", timeout=10)
        return min(v["start-time"] for v in job["vertices"])

    def job_running_ms(self, i: int, jid: str) -> int:
        return http_json(f"{self.urls[i]}/jobs/{jid}", timeout=10)["timestamps"]["RUNNING"]

    def rss(self) -> dict:
        return {"leader_jm": rss_mb(self.jm[self.leader].pid),
                "standby_jm": rss_mb(self.jm[self.standby].pid),
                "taskmanager": rss_mb(self.tm.pid), "zookeeper": rss_mb(self.zk.pid)}


def flink_leader_trial(fl: FlinkHA, jids: list[str], timeout: float) -> dict:
    survivor, victim = fl.standby, fl.leader
    t_kill = fl.kill_jm(victim)
    check, box = timed(lambda: fl.all_running(survivor, jids))
    wait_until(check, timeout, "Flink jobs RUNNING after the leader kill", interval=0.1,
               errors=(OSError, RuntimeError, ValueError, KeyError))
    restarted = sum(1 for j in jids if fl.task_start_ms(survivor, j) >= t_kill * 1000)
    job_running = max(fl.job_running_ms(survivor, j) for j in jids) / 1000 - t_kill
    fl.leader, fl.standby = survivor, victim
    fl.check_leader()
    t0 = time.monotonic()
    fl.start_jm(victim)  # back as the standby
    fl.wait_jm(victim)
    return {"kind": "leader", "jobs": len(jids), "failover_s": box["at"] - t_kill,
            "job_status_running_s": job_running, "restarted": restarted,
            "surviving_restarted": restarted,  # no job ran in the killed JobManager
            "jm_restart_s": time.monotonic() - t0}


def flink_standby_trial(fl: FlinkHA, jids: list[str], window: float) -> dict:
    victim = fl.standby
    t_kill = fl.kill_jm(victim)
    # nothing should move: observe the jobs through a window (deadline-bounded polling)
    not_running, polls = 0, 0
    deadline = time.monotonic() + window
    while time.monotonic() < deadline:
        polls += 1
        try:
            if not fl.all_running(fl.leader, jids):
                not_running += 1
        except (OSError, RuntimeError, ValueError):
            not_running += 1
        time.sleep(0.2)  # poll period of the observation window
    restarted = sum(1 for j in jids if fl.task_start_ms(fl.leader, j) >= t_kill * 1000)
    t0 = time.monotonic()
    fl.start_jm(victim)
    fl.wait_jm(victim)
    return {"kind": "standby", "jobs": len(jids), "failover_s": 0.0 if not not_running
            else None, "restarted": restarted, "surviving_restarted": restarted,
            "moved": 0, "polls_not_running": not_running, "polls": polls,
            "window_s": window, "jm_restart_s": time.monotonic() - t0}


def flink_failover(run_dir: str, profile: str, ks: list[int], trials: int, window: float,
                   timeout: float) -> dict:
    fl = FlinkHA(os.path.join(run_dir, f"flink-{profile}"), profile)
    out = {"profile": profile, "settings": FLINK_PROFILES[profile], "trials": [],
           "errors": []}
    try:
        log(f"Flink {profile}: starting ZooKeeper, 2 JobManagers, 1 TaskManager")
        fl.start()
        out["start_s"] = fl.start_s
        out["rss_idle"] = fl.rss()
        jids: list[str] = []
        for k in ks:
            while len(jids) < k:
                jids.append(fl.run_stream(f"stream-{len(jids)}"))
            wait_until(lambda: fl.all_running(fl.leader, jids), 180,
                       f"{k} Flink streaming jobs running", interval=0.3,
                       errors=(OSError, RuntimeError))
            out[f"rss_jobs_{k}"] = fl.rss()
            for kind in ("leader", "standby"):
                for t in range(trials):
                    if kind == "leader":
                        r = flink_leader_trial(fl, jids, timeout)
                    else:
                        r = flink_standby_trial(fl, jids, window)
                    r["trial"] = t
                    log(f"Flink {profile} K={k} {kind} kill: {json.dumps(r)}")
                    out["trials"].append(r)
    except (TimeoutError, RuntimeError, OSError) as exc:
        # the cluster's state is unknown after a failed trial: keep what was measured
        out["errors"].append(repr(exc)[:500])
        log(f"Flink {profile}: aborted: {exc!r}")
    finally:
        fl.stop()
    return out


def flink_submission(run_dir: str, runs: int, jobs: int, clients_list: list[int],
                     warmup: int) -> dict:
    fl = FlinkHA(os.path.join(run_dir, "flink-submit"), "default")
    out = {"runs": []}
    try:
        log("Flink submission: starting ZooKeeper, 2 JobManagers, 1 TaskManager")
        fl.start()
        jars = {i: fl.upload(i) for i in (0, 1)}

        async def post_one(session, i):
            jm = i % 2  # alternate between both JobManagers (each compiles its jobs)
            async with session.post(f"{fl.urls[jm]}/jars/{jars[jm]}/run",
                                    json={"entryClass": ENTRY,
                                          "programArgsList": ["batch", f"b{i}"]}) as r:
                body = await r.json(content_type=None)
                if r.status != 200:
                    raise RuntimeError(f"HTTP {r.status}: {str(body)[:200]}")
                return body["jobid"]

        for run in range(-1, runs):  # run -1: warm-up (JIT, class loading), not measured
            for clients in clients_list if run >= 0 else [max(clients_list)]:
                res = asyncio.run(closed_loop(post_one, jobs if run >= 0 else warmup,
                                              clients))
                ids = res.pop("ids")
                rows = wait_ended(lambda: fl.overview(fl.leader, timeout=30), ids,
                                  "Flink batch jobs ended", errors=(OSError, RuntimeError))
                res.update(completion(rows, ids, res["t_start"]))
                res["run"] = run
                log(f"Flink submission: {json.dumps(res)}")
                if run >= 0:
                    out["runs"].append(res)
        out["rss_after"] = fl.rss()
    finally:
        fl.stop()
    return out


# ------------------------------------------------------------------------------------ ours

def _ours_base(run_dir: str, name: str) -> str:
    base = tempfile.mkdtemp(prefix=f"jm-vsflink-{name}-")
    RUN_MARKERS.append(base)
    return base


def _peer_pids_dead(pids: list[int]) -> None:
    wait_until(lambda: not any(psutil.pid_exists(p) and
                               psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                               for p in pids), 60, "peers gone",
               errors=(psutil.NoSuchProcess,))


def ours_trial(run_dir: str, profile: str, k: int, kind: str, timeout: float) -> dict:
    settings = {**OUR_SETTINGS, **PROFILES[profile]}
    base = _ours_base(run_dir, f"{profile}-{k}-{kind}")
    pids: list[int] = []
    try:
        with BenchCluster(3, settings, base=base) as c:
            pids = c.pids()
            wait_until(lambda: get(c.urls[0] + "/overview")["peers-alive"] == 3, 30, "3 peers")
            rss_idle = {p: rss_mb(p) for p in c.pids()}
            probe_dir = os.path.join(base, "probes")
            for i in range(k):
                post(c.urls[i % 3] + "/jobs", {"name": f"probe-{i}", "entry": "probe:main",
                                               "pyfiles": [os.path.join(ROOT, "chaos") + "/"],
                                               "args": {"dir": probe_dir}})
            wait_until(lambda: sum(r["state"] == "RUNNING"
                                   for r in snapshot(c.urls[0]).values()) == k,
                       60, "probes running")
            ns = nodes(c.urls[0])
            rss_jobs = {n: rss_mb(v["pid"]) for n, v in ns.items()}
            kill = kill_peer(c.urls, ns, kind == "leader", timeout)
            jobs_per_peer = sorted(len(x["jobs"]) for x in ns.values())
        _peer_pids_dead(pids)
    finally:
        if not leftovers():
            shutil.rmtree(base, ignore_errors=True)
    others = kill["others_restarted"]
    return {"kind": kind, "jobs": k, "jobs_per_peer": jobs_per_peer,
            "failover_s": kill["failover_s"],
            "moved": kill["moved"], "restarted": kill["moved"] + others,
            "surviving_restarted": others, "victim_was_leader": kill["victim"] == kill["leader"],
            "rss_idle": sorted(rss_idle.values()), "rss_jobs": sorted(rss_jobs.values()),
            "leader_rss_jobs": rss_jobs[kill["leader"]]}


def ours_failover(run_dir: str, profile: str, ks: list[int], trials: int,
                  timeout: float) -> dict:
    out = {"profile": profile, "settings": {**OUR_SETTINGS, **PROFILES[profile]},
           "trials": []}
    log(f"ours {profile}: a fresh 3-peer cluster per trial")
    for k in ks:
        for kind in ("leader", "follower"):
            for t in range(trials):
                try:
                    r = ours_trial(run_dir, profile, k, kind, timeout)
                except (TimeoutError, RuntimeError, OSError) as exc:
                    out.setdefault("errors", []).append(f"K={k} {kind} trial {t}: {exc!r}"[:500])
                    log(f"ours {profile} K={k} {kind} trial {t}: failed: {exc!r}")
                    continue
                r["trial"] = t
                log(f"ours {profile} K={k} {kind} kill: "
                    f"{json.dumps({x: y for x, y in r.items() if 'rss' not in x})}")
                out["trials"].append(r)
    return out


def ours_submission(run_dir: str, runs: int, jobs: int, clients_list: list[int],
                    warmup: int) -> dict:
    settings = {**OUR_SETTINGS, "jobmanager.slots": 64}
    base = _ours_base(run_dir, "submit")
    out = {"settings": settings, "runs": []}
    pids: list[int] = []
    try:
        with BenchCluster(3, settings, base=base) as c:
            pids = c.pids()
            wait_until(lambda: get(c.urls[0] + "/overview")["peers-alive"] == 3, 30, "3 peers")
            out["rss_idle"] = [rss_mb(p) for p in pids]
            tag = uuid.uuid4().hex[:8]

            for run in range(-1, runs):  # run -1: warm-up, not measured
                for clients in clients_list if run >= 0 else [max(clients_list)]:
                    async def post_one(session, i, run=run, clients=clients):
                        url = c.urls[i % 3]
                        for _ in range(100):
                            async with session.post(
                                    url + "/jobs", json=dict(TRIVIAL_JOB, name=f"b{i}"),
                                    headers={"X-Request-Id": f"{tag}-{run}-{clients}-{i}"}) as r:
                                body = await r.json(content_type=None)
                                if r.status == 202:
                                    return body["jobid"]
                                if r.status != 503:
                                    raise RuntimeError(f"HTTP {r.status}: {body}")
                            await asyncio.sleep(0.05)  # retry pacing after a 503 (no leader)
                        raise RuntimeError("503 for 5 s")

                    res = asyncio.run(closed_loop(post_one, jobs if run >= 0 else warmup,
                                                  clients))
                    ids = res.pop("ids")
                    rows = wait_ended(lambda: snapshot(c.urls[0]), ids, "our trivial jobs ended")
                    res.update(completion(rows, ids, res["t_start"]))
                    res["run"] = run
                    log(f"ours submission: {json.dumps(res)}")
                    if run >= 0:
                        out["runs"].append(res)
            out["rss_after"] = [rss_mb(p) for p in pids]
        _peer_pids_dead(pids)
    finally:
        if not leftovers():
            shutil.rmtree(base, ignore_errors=True)
    return out


# --------------------------------------------------------------------------------- report

def _times(trials: list[dict], kind: str, k: int) -> list[float]:
    return [t["failover_s"] for t in trials if t["kind"] == kind and t["jobs"] == k
            and t["failover_s"] is not None]


def summarize(data: dict, ks: list[int]) -> dict:
    s: dict = {"failover": {}, "submission": {}, "rss_mb": {}}
    systems = {"flink_default": data.get("flink_default"), "flink_tuned": data.get("flink_tuned"),
               "ours_default": data.get("ours_default"), "ours_fast": data.get("ours_fast")}
    for name, d in systems.items():
        if not d:
            continue
        for k in ks:
            for kind in ("leader", "standby" if name.startswith("flink") else "follower"):
                rows = [t for t in d["trials"] if t["kind"] == kind and t["jobs"] == k]
                f = _times(d["trials"], kind, k)
                key = f"{'leader' if kind == 'leader' else 'non_leader'}_{k}"
                s["failover"].setdefault(key, {})[name] = {
                    "trials": len(rows), "median_s": median(f),
                    "min_s": min(f) if f else None, "max_s": max(f) if f else None,
                    "restarted_median": median([t["restarted"] for t in rows]),
                    "trials_with_jobs_stopped": sum(1 for t in rows if t["failover_s"] is None),
                    "surviving_restarted_total": sum(t["surviving_restarted"] for t in rows),
                    "moved_median": median([t.get("moved", 0) for t in rows]),
                    "jobs": k}
    for name in ("flink_submission", "ours_submission"):
        d = data.get(name)
        if not d:
            continue
        for clients in sorted({r["clients"] for r in d["runs"]}):
            rows = [r for r in d["runs"] if r["clients"] == clients]
            s["submission"].setdefault(f"clients_{clients}", {})[name.split("_")[0]] = {
                "runs": len(rows), "jobs_per_run": rows[0]["submitted"] + rows[0]["errors"],
                "submits_per_s": median([r["submits_per_s"] for r in rows]),
                "completed_per_s": median([r["completed_per_s"] for r in rows]),
                "p50_ms": median([r["p50_ms"] for r in rows]),
                "p99_ms": median([r["p99_ms"] for r in rows]),
                "errors": sum(r["errors"] + r["failed"] for r in rows)}
    kmax = max(ks)
    fl = [d for d in (data.get("flink_default"), data.get("flink_tuned")) if d]
    if fl:
        s["rss_mb"]["flink_leader_idle"] = median([d["rss_idle"]["leader_jm"] for d in fl])
        s["rss_mb"]["flink_standby_idle"] = median([d["rss_idle"]["standby_jm"] for d in fl])
        s["rss_mb"]["flink_leader_jobs"] = median([d[f"rss_jobs_{kmax}"]["leader_jm"]
                                                   for d in fl])
        s["rss_mb"]["flink_standby_jobs"] = median([d[f"rss_jobs_{kmax}"]["standby_jm"]
                                                    for d in fl])
        s["rss_mb"]["flink_taskmanager_jobs"] = median([d[f"rss_jobs_{kmax}"]["taskmanager"]
                                                        for d in fl])
    ours = [t for d in (data.get("ours_default"), data.get("ours_fast")) if d
            for t in d["trials"]]
    if ours:
        s["rss_mb"]["ours_peer_idle"] = median([max(t["rss_idle"]) for t in ours])
        s["rss_mb"]["ours_peer_jobs"] = median([max(t["rss_jobs"]) for t in ours
                                                if t["jobs"] == kmax])
        s["rss_mb"]["ours_leader_jobs"] = median([t["leader_rss_jobs"] for t in ours
                                                  if t["jobs"] == kmax])
    s["rss_mb"]["ours_jobs_k"] = kmax
    s["flink_tasks_after_job_running_s"] = median(
        [t["failover_s"] - t["job_status_running_s"] for d in fl for t in d["trials"]
         if t["kind"] == "leader"])
    return s


def _ratio(a, b) -> str:
    try:
        if a is None or b is None or b != b or a != a or b == 0:
            return "n/a"
        return f"{a / b:.1f}x"
    except TypeError:
        return "n/a"


def _cell(x: dict | None) -> str:
    if not x or x["median_s"] != x["median_s"]:
        return "n/a"
    if x["max_s"] == 0 and not x["trials_with_jobs_stopped"]:
        return "0 s (no job stopped)"
    note = (f" ({x['trials_with_jobs_stopped']} trials: jobs not RUNNING during the window)"
            if x["trials_with_jobs_stopped"] else "")
    return f"{x['median_s']:.2f} s [{x['min_s']:.2f}-{x['max_s']:.2f}]{note}"


def render(s: dict, meta: dict) -> str:
    L = []
    L.append("# Our JobManager cluster vs Apache Flink 2.3 standby-JobManager HA")
    L.append("")
    L.append(f"Measured {meta['time']} by `bench/vs_flink.py` ({meta['command']}) on "
             f"{meta['host']}: {meta['cpus']} cores, everything on 127.0.0.1. "
             f"Flink: ZooKeeper + 2 JobManagers + 1 TaskManager (16 slots). Ours: 3 peers. "
             f"Medians over the trials, [min-max].")
    L.append("")
    L.append("## Failover (`kill -9`)")
    L.append("")
    L.append("Time from the kill until every job is RUNNING again, median [min-max], and what "
             "was restarted: Flink restarts every job of the cluster on a leader loss (their "
             "tasks ran in the surviving TaskManager); ours moves only the killed peer's jobs "
             "and restarts no other job.")
    L.append("")
    sysnames = ("flink_default", "flink_tuned", "ours_default", "ours_fast")
    labels = ("Flink default", "Flink tuned", "ours default", "ours fast")
    ntr = {n: max([row[n]["trials"] for row in s["failover"].values() if n in row] or [0])
           for n in sysnames}
    L.append("| kill -9 of | jobs | " + " | ".join(f"{lb} ({ntr[n]} trials)"
                                                  for n, lb in zip(sysnames, labels)) + " |")
    L.append("|---|---|---|---|---|---|")

    def cell(name, x, k):
        if not x:
            return "n/a"
        if name.startswith("flink"):
            what = f"{x['restarted_median']:.0f}/{k} jobs restarted"
        else:
            what = (f"{x['moved_median']:.0f} moved, {x['surviving_restarted_total']} other "
                    f"jobs restarted")
        return f"{_cell(x)}; {what}"
    for key, row in s["failover"].items():
        kind, k = key.rsplit("_", 1)
        what = ("leader (Flink: leader JM; ours: Raft leader peer)" if kind == "leader" else
                "non-leader (Flink: standby JM; ours: follower with most jobs)")
        L.append(f"| {what} | {k} | " + " | ".join(cell(n, row.get(n), k) for n in sysnames)
                 + " |")
    L.append("")
    L.append("## REST submission of trivial jobs (closed loop)")
    L.append("")
    L.append("| clients | figure | Flink (default) | ours (default) | ratio ours/Flink |")
    L.append("|---|---|---|---|---|")
    for key, row in s["submission"].items():
        c = key.split("_")[1]
        fl, ou = row.get("flink"), row.get("ours")
        for fig, unit, inv in (("submits_per_s", "submits/s", False),
                               ("completed_per_s", "completed jobs/s", False),
                               ("p50_ms", "submit p50 ms", True),
                               ("p99_ms", "submit p99 ms", True)):
            a = fl and fl[fig]
            b = ou and ou[fig]
            ratio = _ratio(a, b) + " faster" if inv else _ratio(b, a)
            fa = f"{a:.1f}" if fl else "n/a"
            fb = f"{b:.1f}" if ou else "n/a"
            L.append(f"| {c} | {unit} | {fa} | {fb} | {ratio if fl and ou else 'n/a'} |")
        if fl and ou:
            L.append(f"| {c} | runs x jobs, errors | {fl['runs']} x {fl['jobs_per_run']}, "
                     f"{fl['errors']} | {ou['runs']} x {ou['jobs_per_run']}, {ou['errors']} | |")
    L.append("")
    r = s["rss_mb"]
    k = r.get("ours_jobs_k")
    L.append("## Control-plane memory (RSS, MB)")
    L.append("")
    L.append("| process | idle | with " + str(k) + " jobs running |")
    L.append("|---|---|---|")
    f = lambda x: f"{x:.0f}" if isinstance(x, (int, float)) and x == x else "n/a"  # noqa: E731
    L.append(f"| Flink JobManager, leader | {f(r.get('flink_leader_idle'))} | "
             f"{f(r.get('flink_leader_jobs'))} |")
    L.append(f"| Flink JobManager, standby | {f(r.get('flink_standby_idle'))} | "
             f"{f(r.get('flink_standby_jobs'))} |")
    L.append(f"| our peer (largest of 3, without its children) | {f(r.get('ours_peer_idle'))} "
             f"| {f(r.get('ours_peer_jobs'))} |")
    L.append(f"| ratio Flink leader JM / our peer | "
             f"{_ratio(r.get('flink_leader_idle'), r.get('ours_peer_idle'))} | "
             f"{_ratio(r.get('flink_leader_jobs'), r.get('ours_peer_jobs'))} |")
    L.append(f"| (Flink TaskManager, for reference) | | {f(r.get('flink_taskmanager_jobs'))} |")
    L.append("")
    L.append("## Ratios")
    L.append("")
    L.append("| figure | value |")
    L.append("|---|---|")
    for key, row in s["failover"].items():
        kind, kk = key.rsplit("_", 1)
        if kind != "leader":
            continue
        od, of = row.get("ours_default"), row.get("ours_fast")
        fd, ft = row.get("flink_default"), row.get("flink_tuned")
        g = lambda x: x and x["median_s"]  # noqa: E731
        L.append(f"| leader failover speed-up, {kk} jobs: ours default vs Flink default / "
                 f"tuned | {_ratio(g(fd), g(od))} / {_ratio(g(ft), g(od))} |")
        L.append(f"| leader failover speed-up, {kk} jobs: ours fast vs Flink default / tuned "
                 f"| {_ratio(g(fd), g(of))} / {_ratio(g(ft), g(of))} |")
        sf = sum(x["surviving_restarted_total"] for x in (fd, ft) if x)
        nf = sum(x["trials"] for x in (fd, ft) if x)
        so = sum(x["surviving_restarted_total"] for x in (od, of) if x)
        no = sum(x["trials"] for x in (od, of) if x)
        L.append(f"| restarts of surviving jobs, leader kill, {kk} jobs (all trials) | "
                 f"Flink {sf} in {nf} trials ({kk} per trial), ours {so} in {no} trials |")
    for key, row in s["submission"].items():
        fl, ou = row.get("flink"), row.get("ours")
        if fl and ou:
            L.append(f"| submissions/s ratio ours/Flink, {key.split('_')[1]} client(s) | "
                     f"{_ratio(ou['submits_per_s'], fl['submits_per_s'])} |")
    L.append(f"| RSS ratio Flink leader JM / our peer, with {k} jobs | "
             f"{_ratio(r.get('flink_leader_jobs'), r.get('ours_peer_jobs'))} |")
    L.append("")
    L.append("## How it was measured")
    L.append("")
    gap = s.get("flink_tasks_after_job_running_s", float("nan"))
    notes = [
        f"Flink {meta.get('flink_version', '')} from the PyPI wheels; job: "
        "`bench/flink_job/BenchJob.java` (throttled DataGeneratorSource, 4 records/s, into a "
        "DiscardingSink, checkpoints every 5 s; parallelism 1). Profiles: default (heartbeat "
        "10 s / 50 s, ZooKeeper session 60 s; zoo.cfg sets `maxSessionTimeout=60000` so that "
        "the 60 s is granted) and tuned (heartbeat 1 s / 5 s, session 6 s, connection timeout "
        "3 s). One cluster per profile, K = 4 jobs, then 8 more for K = 12; the killed "
        "JobManager is started again (as the new standby) before the next trial.",
        "Flink \"RUNNING again\": the first poll (every 0.1 s) of the surviving JobManager's "
        "`/jobs/overview` in which every job is RUNNING with all its tasks running (Flink's "
        f"own job-RUNNING timestamp, without the tasks, is {gap:.2f} s earlier in the median: "
        "`job_status_running_s` in the JSON). Restarted = tasks started after the kill. "
        f"Standby kill: the jobs are watched for {meta.get('window', 10):.0f} s (a poll every "
        "0.2 s) and must stay RUNNING without a restart.",
        "Ours: a fresh 3-peer cluster per trial (K probe jobs spread by the placement), "
        "settings as `bench/failover.py`; time = the cluster's RUNNING timestamp of the last "
        "moved job minus the kill; \"other jobs restarted\" = jobs not on the killed peer whose "
        "attempt or restart count changed.",
        f"Submission: {meta.get('warmup', 0)} unmeasured jobs first (JIT warm-up), then "
        "closed-loop clients. Flink: `POST /jars/<id>/run`, alternating between both "
        "JobManagers (each compiles its share of the job graphs); ours: `POST /jobs` with "
        "`X-Request-Id` to the 3 peers in turn. Completed jobs/s = FINISHED jobs / (first "
        "submission -> last end-time).",
        "RSS: Flink JobManager JVMs (leader and standby; idle right after start, and with "
        f"the {k} jobs running; median of the two profile runs); ours: the peer process alone "
        "(zygote and job processes excluded), the largest of the 3, idle after start and with "
        f"the jobs running, median over the trials. With {k} jobs the Flink leader holds every "
        "JobMaster, while each of our peers runs about a third of them.",
    ]
    L.extend("* " + n for n in notes)
    L.append("")
    return "\n".join(L)


def chart(s: dict, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(17, 5.8), layout="constrained")
    names = [("flink_default", "Flink default", "#c0504d"), ("flink_tuned", "Flink tuned",
                                                               "#f79646"),
             ("ours_default", "ours default", "#4f81bd"), ("ours_fast", "ours fast", "#9bbb59")]
    keys = list(s["failover"])
    ax = axes[0]
    w = 0.2
    for n, (name, label, color) in enumerate(names):
        ys = [s["failover"][k].get(name, {}).get("median_s") or 0 for k in keys]
        ys = [y if y == y else 0 for y in ys]
        ax.bar([i + (n - 1.5) * w for i in range(len(keys))], [max(y, 0.01) for y in ys], w,
               label=label, color=color)
        for i, y in enumerate(ys):
            ax.text(i + (n - 1.5) * w, max(y, 0.01) * 1.05,
                    f"{y:.1f}" if y else "0\nnone\nstopped", ha="center", fontsize=6)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([k.replace("non_leader", "non-leader").replace("_", "\n") + " jobs"
                        for k in keys], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("s until every job RUNNING again (log)")
    ax.set_title("kill -9 failover (median)")
    ax.legend(fontsize=8)
    ax = axes[1]
    sub = s["submission"]
    labels, fv, ov = [], [], []
    for key, row in sub.items():
        c = key.split("_")[1]
        for fig_key, nm in (("submits_per_s", "submits/s"), ("completed_per_s", "completed/s")):
            labels.append(f"{nm}\n{c} client(s)")
            fv.append((row.get("flink") or {}).get(fig_key, 0))
            ov.append((row.get("ours") or {}).get(fig_key, 0))
    x = range(len(labels))
    ax.bar([i - 0.2 for i in x], fv, 0.4, label="Flink", color="#c0504d")
    ax.bar([i + 0.2 for i in x], ov, 0.4, label="ours", color="#4f81bd")
    for i in x:
        ax.text(i - 0.2, fv[i] * 1.05 + 0.01, f"{fv[i]:.0f}", ha="center", fontsize=7)
        ax.text(i + 0.2, ov[i] * 1.05 + 0.01, f"{ov[i]:.0f}", ha="center", fontsize=7)
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_yscale("log")
    ax.set_title("REST submission of trivial jobs (median)")
    ax.legend(fontsize=8)
    ax = axes[2]
    r = s["rss_mb"]
    groups = [("Flink JM leader", r.get("flink_leader_idle"), r.get("flink_leader_jobs")),
              ("Flink JM standby", r.get("flink_standby_idle"), r.get("flink_standby_jobs")),
              ("our peer", r.get("ours_peer_idle"), r.get("ours_peer_jobs"))]
    x = range(len(groups))
    idle = [g[1] or 0 for g in groups]
    busy = [g[2] or 0 for g in groups]
    ax.bar([i - 0.2 for i in x], idle, 0.4, label="idle", color="#8faadc")
    ax.bar([i + 0.2 for i in x], busy, 0.4, label=f"{r.get('ours_jobs_k')} jobs running",
           color="#2f5597")
    for i in x:
        ax.text(i - 0.2, idle[i] + 5, f"{idle[i]:.0f}", ha="center", fontsize=8)
        ax.text(i + 0.2, busy[i] + 5, f"{busy[i]:.0f}", ha="center", fontsize=8)
    ax.set_xticks(list(x))
    ax.set_xticklabels([g[0] for g in groups], fontsize=8)
    ax.set_ylabel("RSS MB")
    ax.set_title("control-plane process memory")
    ax.legend(fontsize=8)
    fig.suptitle("JobManager cluster (3 peers) vs Apache Flink 2.3 ZooKeeper HA (2 JMs), "
                 "127.0.0.1, 2 cores")
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ----------------------------------------------------------------------------------- main

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=3, help="trials per Flink failover case")
    ap.add_argument("--ours-trials", type=int, default=10,
                    help="trials per failover case of ours (a fresh cluster each, ~5 s)")
    ap.add_argument("--jobs", default="4,12", help="streaming jobs K, comma-separated")
    ap.add_argument("--submit-runs", type=int, default=3)
    ap.add_argument("--flink-submit-jobs", type=int, default=40, help="jobs per Flink run")
    ap.add_argument("--ours-submit-jobs", type=int, default=500, help="jobs per run of ours")
    ap.add_argument("--warmup-jobs", type=int, default=80,
                    help="unmeasured submissions before the submission runs (both systems)")
    ap.add_argument("--window", type=float, default=10.0,
                    help="s to watch Flink's jobs after the standby JobManager is killed")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 trial, 4 jobs, 1 submission run of few jobs")
    ap.add_argument("--skip-setup", action="store_true",
                    help="use bench/.flink as it is (no download, unzip or compile)")
    ap.add_argument("--only", choices=("flink", "ours"), default=None,
                    help="run one system only (for debugging)")
    ap.add_argument("--out", default=os.path.join(RESULTS, "vs_flink"),
                    help="output prefix (.md, .json, .png are added)")
    args = ap.parse_args()
    if args.quick:
        args.trials, args.ours_trials, args.jobs = 1, 1, "4"
        args.submit_runs, args.flink_submit_jobs, args.ours_submit_jobs = 1, 12, 60
        args.warmup_jobs = 4
        args.window = 5.0
    ours_trials = args.ours_trials
    ks = [int(x) for x in args.jobs.split(",")]
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    t_begin = time.monotonic()
    if args.skip_setup:
        check_setup()
    else:
        setup()
    run_dir = os.path.join(FLINK_DIR, "run", time.strftime("%Y%m%d-%H%M%S"))
    for old in os.listdir(os.path.join(FLINK_DIR, "run")) if os.path.isdir(
            os.path.join(FLINK_DIR, "run")) else []:
        shutil.rmtree(os.path.join(FLINK_DIR, "run", old), ignore_errors=True)
    os.makedirs(run_dir)
    RUN_MARKERS.append(run_dir)
    data: dict = {}
    timeout = 300.0
    phases_s: dict = {}
    try:
        if args.only in (None, "ours"):
            t0 = time.monotonic()
            data["ours_submission"] = ours_submission(run_dir, args.submit_runs,
                                                      args.ours_submit_jobs, [1, 8],
                                                      args.warmup_jobs)
            for profile in ("default", "fast"):
                data[f"ours_{profile}"] = ours_failover(run_dir, profile, ks, ours_trials,
                                                        timeout)
            phases_s["ours"] = time.monotonic() - t0
        if args.only in (None, "flink"):
            t0 = time.monotonic()
            data["flink_submission"] = flink_submission(run_dir, args.submit_runs,
                                                        args.flink_submit_jobs, [1, 8],
                                                        args.warmup_jobs)
            for profile in ("tuned", "default"):
                data[f"flink_{profile}"] = flink_failover(run_dir, profile, ks, args.trials,
                                                          args.window, timeout)
            phases_s["flink"] = time.monotonic() - t0
    finally:
        left = leftovers()
        if left:
            log("processes left behind (killing them by PID): " + "; ".join(left))
            for line in left:
                try:
                    os.kill(int(line.split()[0]), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
    left = leftovers()
    log("no process left behind" if not left else f"STILL ALIVE: {left}")
    summary = summarize(data, ks)
    meta = {"time": time.strftime("%Y-%m-%d %H:%M"), "host": socket.gethostname(),
            "cpus": os.cpu_count(), "command": "`" + " ".join(
                [".venv/bin/python", "bench/vs_flink.py", *sys.argv[1:]]) + "`",
            "flink_version": FLINK_VERSION, "duration_s": time.monotonic() - t_begin,
            "phases_s": phases_s, "ks": ks, "flink_trials": args.trials,
            "ours_trials": ours_trials, "window": args.window, "warmup": args.warmup_jobs,
            "java": subprocess.run(
                ["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0],
            "leftover_processes": left}
    text = render(summary, meta)
    text += (f"\nFull run: {meta['duration_s'] / 60:.1f} min. Raw numbers: "
             f"`{os.path.relpath(args.out, ROOT)}.json`.\n")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump({"meta": meta, "summary": summary, "data": data}, f, indent=1, default=str)
    with open(args.out + ".md", "w") as f:
        f.write(text)
    chart(summary, args.out + ".png")
    print(text)
    return 0 if not left else 1


if __name__ == "__main__":
    sys.exit(main())
