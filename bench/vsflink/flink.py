"""The Flink side of bench/vs_flink.py: ZooKeeper HA with 2 JobManagers and 1 TaskManager,
failover and submission trials."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid

import yaml

from bench.common import wait_until
from jm.runtime.ports import free_ports
from bench.vsflink.procs import (ENTRY, FLINK_PROFILES, HOME, JOB_JAR, RUN_MARKERS,
                                 closed_loop, completion, http_json, log, rss_mb, spawn,
                                 stop_proc, timed, wait_ended)


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
