"""Constants, set-up of the Flink home, processes, HTTP and timing helpers of
bench/vs_flink.py."""
from __future__ import annotations

import asyncio
import ctypes
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request

import psutil

from bench.common import ROOT, pct, wait_until
from jm.policy.jobs.vocab import TERMINAL

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
    from bench.flinkdist import ensure_home
    ensure_home(FLINK_VERSION, log)
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
    final = TERMINAL

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
