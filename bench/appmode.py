"""Application mode against spark-submit, on one real Spark standalone cluster (a Master
and two Workers from pyspark's distribution) and real peers started with bin/ scripts.

    .venv/bin/python bench/appmode.py [--trials 5] [--out bench/results/appmode.json]

Phases (each trial's figures are printed as a JSON line; medians at the end):
1. spark-submit start: `spark-submit --master spark://... app.py` launched -> the
   application registered at the master (its `starttime` in the master's JSON);
2. classic job start: `POST /jobs` of the same script -> its application registered;
3. classic failover: a long-running classic job, SIGKILL of its peer -> the next
   attempt's application registered (target: heartbeat.timeout + spark-submit's start);
4. memory: one peer running 4 classic jobs: the peer process's peak RSS, and each
   driver's (job process + driver JVM) apart;
5. connect-mode start: a script job on a peer with a warm Spark Connect server, submit ->
   its first query answered (written by the script with the wall clock).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import psutil

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import ROOT, BenchCluster, get, median, post, request, wait_until  # noqa: E402
from jm.config import KEYS  # noqa: E402
from jm.local.standalone import StandaloneCluster, spark_env  # noqa: E402
from jm.policy.jobs.vocab import TERMINAL  # noqa: E402
from jm.runtime.sparkjvm import spark_home  # noqa: E402

SHORT_APP = """
import sys
from pyspark.sql import SparkSession
spark = SparkSession.builder.appName(sys.argv[1]).getOrCreate()
print(spark.sparkContext.parallelize(range(1000), 2).sum())
spark.stop()
"""
LONG_APP = """
import time
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
while True:
    spark.sparkContext.parallelize(range(4), 2).map(lambda x: time.sleep(0.3) or x).count()
"""
CONNECT_APP = """
import sys, time
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
spark.sql("SELECT 1").collect()
open(sys.argv[1], "w").write(repr(time.time()))
"""


def write(path: str, text: str) -> str:
    with open(path, "w") as f:
        f.write(text)
    return path


def registered(sa: StandaloneCluster, name: str, known: set, timeout: float = 180) -> dict:
    """The first application named `name` not in `known`, active or completed."""
    def new():
        st = sa.status()
        return next((a for a in st.get("activeapps", []) + st.get("completedapps", [])
                     if a["name"] == name and a["id"] not in known), None)
    return wait_until(new, timeout, f"application {name} registered", interval=0.05)


def all_app_ids(sa: StandaloneCluster) -> set:
    st = sa.status()
    return {a["id"] for a in st.get("activeapps", []) + st.get("completedapps", [])}


def spark_submit_trial(sa: StandaloneCluster, app: str, name: str, log: str) -> float:
    known = all_app_ids(sa)
    env = spark_env()
    with open(log, "ab") as out:
        t0 = time.time()
        proc = subprocess.Popen([os.path.join(spark_home(), "bin", "spark-submit"),
                                 "--master", sa.master_url, "--conf", "spark.ui.port=0",
                                 "--conf", "spark.driver.host=127.0.0.1", app, name],
                                stdout=out, stderr=out, env=env, start_new_session=True)
        try:
            app_rec = registered(sa, name, known)
            proc.wait(180)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return app_rec["starttime"] / 1000 - t0


def wait_ended(url: str, jid: str, timeout: float = 180) -> dict:
    return wait_until(lambda: (lambda j: j if j["state"] in TERMINAL
                               else None)(get(f"{url}/jobs/{jid}")), timeout, f"{jid} ended",
                      interval=0.1)


def classic_trial(c: BenchCluster, sa: StandaloneCluster, app: str, name: str) -> float:
    known = all_app_ids(sa)
    t0 = time.time()
    jid = post(c.urls[0] + "/jobs", {"script": app, "argv": [name], "name": name})["jobid"]
    app_rec = registered(sa, name, known)
    job = wait_ended(c.urls[0], jid)
    assert job["state"] == "FINISHED", job
    return app_rec["starttime"] / 1000 - t0


def failover_trial(c: BenchCluster, sa: StandaloneCluster, app: str, name: str) -> dict:
    known = all_app_ids(sa)
    jid = post(c.urls[0] + "/jobs", {"script": app, "name": name})["jobid"]
    first = registered(sa, name, known)
    wait_until(lambda: [a for a in sa.active_apps(name) if a["state"] == "RUNNING"], 120,
               "first application running")
    job = get(f"{c.urls[0]}/jobs/{jid}")
    ns = {n["id"]: n for n in get(c.urls[0] + "/nodes")["nodes"]}
    victim = ns[job["node"]]
    line = f"127.0.0.1:{victim['rest-port']}:{victim['raft-port']}"
    survivor = next(u for u in c.urls if not u.endswith(f":{victim['rest-port']}"))
    most = 0
    t_kill = time.time()
    os.kill(victim["pid"], signal.SIGKILL)

    def second():
        nonlocal most
        apps = sa.active_apps(name)
        most = max(most, len(apps))
        return next((a for a in apps if a["id"] != first["id"]), None)
    nxt = wait_until(second, 240, "the next attempt's application", interval=0.1)
    out = {"failover_s": nxt["starttime"] / 1000 - t_kill, "max_live_apps": most}
    request("PATCH", f"{survivor}/jobs/{jid}?mode=cancel")
    wait_ended(survivor, jid)
    wait_until(lambda: not sa.active_apps(name), 60, "no application left after cancel")
    subprocess.run([os.path.join(ROOT, "bin", "jobmanager.sh"), "start", line], env=c.env,
                   check=True, capture_output=True, timeout=120)
    wait_until(lambda: get(f"http://127.0.0.1:{victim['rest-port']}/healthz").get("ok"), 60,
               "the killed peer back")
    return out


def rss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            total += psutil.Process(pid).memory_info().rss
        except psutil.Error:
            pass
    return total / 2 ** 20


def memory_phase(sa: StandaloneCluster, app: str, seconds: float) -> dict:
    settings = {"spark.master": sa.master_url, "spark.connect.embedded": False,
                "restart-strategy.type": "none"}
    with BenchCluster(1, settings) as c:
        peer = psutil.Process(c.pids()[0])
        idle = rss_mb([peer.pid])
        known = all_app_ids(sa)
        ids = [post(c.urls[0] + "/jobs", {"script": app, "name": f"mem-{i}"})["jobid"]
               for i in range(4)]
        for i in range(4):
            registered(sa, f"mem-{i}", known)
        peak, drivers = idle, []
        end = time.time() + seconds
        while time.time() < end:
            peak = max(peak, rss_mb([peer.pid]))
            zygote = [p for p in peer.children() if "jm.runtime.zygote" in " ".join(p.cmdline())]
            jobs = zygote[0].children() if zygote else []
            drivers = [rss_mb([j.pid] + [d.pid for d in j.children(recursive=True)])
                       for j in jobs]
            time.sleep(0.5)
        zyg = rss_mb([p.pid for p in peer.children() if "jm.runtime.zygote" in
                      " ".join(p.cmdline())])
        for jid in ids:
            request("PATCH", f"{c.urls[0]}/jobs/{jid}?mode=cancel")
        for jid in ids:
            wait_ended(c.urls[0], jid)
    return {"peer_idle_rss_mb": round(idle, 1), "peer_peak_rss_mb": round(peak, 1),
            "zygote_rss_mb": round(zyg, 1),
            "driver_rss_mb": [round(d, 1) for d in drivers]}


def connect_phase(trials: int, tmp: str) -> list[float]:
    app = write(os.path.join(tmp, "connect_app.py"), CONNECT_APP)
    settings = {"spark.connect.embedded": True, "spark.master": "local[1]",
                "spark.driver.memory": "512m", "restart-strategy.type": "none"}
    out = []
    with BenchCluster(1, settings) as c:
        wait_until(lambda: get(c.urls[0] + "/healthz").get("spark-ready"), 300, "Spark ready")
        for i in range(trials + 1):  # the first one warms the server's session path
            mark = os.path.join(tmp, f"connect-{i}.t")
            t0 = time.time()
            jid = post(c.urls[0] + "/jobs", {"script": app, "argv": [mark],
                                             "spark-mode": "connect"})["jobid"]
            job = wait_ended(c.urls[0], jid)
            assert job["state"] == "FINISHED", job
            took = float(open(mark).read()) - t0
            print(json.dumps({"phase": "connect-start", "trial": i, "s": round(took, 3)}),
                  flush=True)
            if i:
                out.append(took)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--memory-seconds", type=float, default=20)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "appmode.json"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="jm-appmode-")
    short = write(os.path.join(tmp, "short_app.py"), SHORT_APP)
    long_app = write(os.path.join(tmp, "long_app.py"), LONG_APP)
    res: dict = {"trials": args.trials}
    with StandaloneCluster(os.path.join(tmp, "spark"), workers=2, cores=1, memory="1g") as sa:
        submit_s, classic_s, failover = [], [], []
        settings = {"spark.master": sa.master_url, "spark.connect.embedded": False,
                    "restart-strategy.type": "none"}
        with BenchCluster(3, settings) as c:
            for i in range(args.trials + 1):  # trial 0 warms the JVMs' files (page cache)
                s = spark_submit_trial(sa, short, f"submit-{i}", os.path.join(tmp, "ss.log"))
                k = classic_trial(c, sa, short, f"classic-{i}")
                print(json.dumps({"phase": "start", "trial": i, "spark_submit_s": round(s, 3),
                                  "classic_job_s": round(k, 3)}), flush=True)
                if i:
                    submit_s.append(s)
                    classic_s.append(k)
            for i in range(args.trials):
                f = failover_trial(c, sa, long_app, f"failover-{i}")
                print(json.dumps({"phase": "failover", "trial": i, **f}), flush=True)
                failover.append(f)
        memory = memory_phase(sa, long_app, args.memory_seconds)
        print(json.dumps({"phase": "memory", **memory}), flush=True)
    connect = connect_phase(max(args.trials, 10), tmp)
    parse, default = KEYS["heartbeat.timeout"]
    hb_timeout = parse(default)  # the peers ran with the default
    res.update({
        "spark_submit_start_s": submit_s, "classic_start_s": classic_s,
        "failover": failover, "memory": memory, "connect_start_s": connect,
        "median": {
            "spark_submit_start_s": round(median(submit_s), 3),
            "classic_start_s": round(median(classic_s), 3),
            "classic_vs_spark_submit": round(median(classic_s) / median(submit_s), 3),
            "failover_s": round(median([f["failover_s"] for f in failover]), 3),
            "failover_target_s": round(hb_timeout + median(submit_s), 3),
            "max_live_apps_of_one_job": max(f["max_live_apps"] for f in failover),
            "connect_start_p50_s": round(median(connect), 3),
        },
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res["median"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
