"""Application mode end to end: a real Spark standalone cluster (a Master and two Workers
from pyspark's own distribution), 3 peers started with bin/ scripts whose spark.master is
that cluster, unmodified spark-submit style applications run with `jm run`; their
executors run on the workers; an application is fenced with its attempt (a SIGKILLed
peer's application is gone before the next attempt's registers; a cancel leaves none)."""
import glob
import os
import re
import signal
import subprocess
import sys
import threading

import pytest

from jm.local.standalone import StandaloneCluster
from tests.e2e.procs import ProcessCluster, assert_gone
from tests.helpers import CLASS_ARCHIVE, EXECUTOR_JVM, ROOT, http, http_server, poll

pytestmark = pytest.mark.slow
EXAMPLES = os.path.join(ROOT, "examples")
from jm.policy.jobs.vocab import TERMINAL  # the states a job ends in


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    sa = StandaloneCluster(str(tmp_path_factory.mktemp("standalone")), workers=2, cores=1,
                           memory="1g", class_archive=CLASS_ARCHIVE)
    try:
        sa.start(timeout=180)
        yield sa
    finally:
        pids = sa.pids()  # known before the stop (it forgets them)
        sa.stop()
        assert_gone(pids, "Spark daemons")


@pytest.fixture(scope="module")
def cluster(spark, tmp_path_factory):
    c = ProcessCluster(str(tmp_path_factory.mktemp("appmode")), 3, {
        "spark.master": spark.master_url, "spark.connect.embedded": False,
        "restart-strategy.type": "none", "spark.executor-wait-warning": "3 s",
        "spark.conf.spark.executor.memory": "512m",
        "spark.conf.spark.executor.extraJavaOptions": EXECUTOR_JVM})
    try:
        c.start()
        yield c
    finally:
        c.stop()


def jm(c, *args, timeout=300):
    return subprocess.run([sys.executable, "-m", "jm.client.cli", *args], cwd=ROOT,
                          env=c.env, capture_output=True, text=True, timeout=timeout)


def job_of(stderr: str) -> str:
    m = re.search(r"\[jm\] job ([0-9a-f]{32}) submitted", stderr)
    assert m, stderr
    return m.group(1)


def run_dirs(c, node, jid):
    """The glob of a job's attempt run dirs on `node`."""
    return os.path.join(c.base, "data", node.replace(":", "_"), "jobs", jid, "*")


def job(c, jid, peer=0):
    s, b = http("GET", f"{c.urls[peer]}/jobs/{jid}")
    assert s == 200, b
    return b


def test_pi_runs_unchanged_with_executors_on_the_workers(cluster, spark):
    r = jm(cluster, "run", os.path.join(EXAMPLES, "pi.py"), "4", "--wait")
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-2000:])
    assert re.search(r"Pi is roughly 3\.1\d*", r.stdout), r.stdout[-3000:]
    jid = job_of(r.stderr)
    attempt = job(cluster, jid, peer=2)["attempts"][-1]
    app_id = attempt["spark-app-id"]
    assert app_id.startswith("app-"), attempt
    assert attempt["spark-ui"].startswith("http://127.0.0.1:")
    executors = spark.executors_of(app_id)
    assert executors, f"no executor of {app_id} ran on a worker"
    assert {e["worker"] for e in executors} <= {w["id"] for w in spark.status()["workers"]}
    status = jm(cluster, "status", jid)
    assert status.returncode == 0 and app_id in status.stdout, status.stdout
    assert re.search(r"spark mode:\s+classic", status.stdout), status.stdout
    done = [a for a in spark.status()["completedapps"] if a["id"] == app_id]
    assert done and done[0]["name"] == "PythonPi"  # the script's own appName


def test_etl_udf_from_py_files_runs_on_the_executors(cluster, spark, tmp_path):
    out = str(tmp_path / "etl-out")
    r = jm(cluster, "run", os.path.join(EXAMPLES, "etl.py"), "-", out,
           "--py-files", os.path.join(EXAMPLES, "etl_helpers.py"), "--name", "etl-e2e",
           "--conf", "spark.sql.shuffle.partitions=2", "--wait")
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-2000:])
    # the script's rows (the driver's output also carries Spark's own log: an ERROR with a
    # stack trace when a late executor message meets a stopped context, under load)
    lines = [ln for ln in r.stdout.splitlines() if re.fullmatch(r"\w+\t\d+\t[\d.]+", ln)]
    assert lines == ["DE\t6\t76.5", "FR\t6\t90.0", "US\t6\t99.0", "unknown\t3\t49.5"], lines
    assert any(f.endswith(".parquet") for f in os.listdir(out))
    jid = job_of(r.stderr)
    info = job(cluster, jid)
    assert info["name"] == "etl-e2e" and info["spec"]["spark-conf"] == {
        "spark.sql.shuffle.partitions": "2"}
    assert spark.executors_of(info["attempts"][-1]["spark-app-id"])


REQS_APP = """from pyspark.sql import SparkSession
spark = SparkSession.builder.appName("reqs").getOrCreate()
jar = spark._jvm.java.lang.Thread.currentThread().getContextClassLoader().getResource(
    "jm-hello.txt")
print("JAR", jar.toString() if jar is not None else None)

def where(_):
    import sys, tabulate
    return f"{tabulate.__version__}|{tabulate.__file__}|{sys.executable}"
print("DRIVER", __import__("tabulate").__version__)
print("EXECUTOR", spark.sparkContext.parallelize([0], 1).map(where).collect()[0])
"""


@pytest.fixture
def maven_repo(tmp_path):
    """A Maven repository served over HTTP on loopback holding com.example.jm:hello:1.0,
    a jar with one resource (jm-hello.txt): its URL."""
    import functools
    import hashlib
    import http.server
    import zipfile
    root = tmp_path / "maven"
    d = root / "com" / "example" / "jm" / "hello" / "1.0"
    d.mkdir(parents=True)
    with zipfile.ZipFile(d / "hello-1.0.jar", "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
        z.writestr("jm-hello.txt", "hello from a package\n")
    (d / "hello-1.0.pom").write_text(
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0'
        '</modelVersion><groupId>com.example.jm</groupId><artifactId>hello</artifactId>'
        '<version>1.0</version><packaging>jar</packaging></project>\n')
    for f in list(d.iterdir()):
        (d / (f.name + ".sha1")).write_text(hashlib.sha1(f.read_bytes()).hexdigest())
    with http_server(functools.partial(http.server.SimpleHTTPRequestHandler,
                                       directory=str(root))) as port:
        yield f"http://127.0.0.1:{port}/"


def test_a_job_s_requirements_and_packages_reach_a_cluster(cluster, spark, tmp_path,
                                                           maven_repo):
    """Issue 42: on a cluster, a classic-mode job's environment goes to its executors as
    spark-submit ships a venv (spark.archives `env.tar.gz#jm-python`, the workers' Python
    `./jm-python/bin/python`): its UDF imports the job's version from the unpacked copy in
    the executor's folder, not from the peer's cache. Its --packages are resolved by
    Spark's own Ivy resolution from the --repositories given, onto the driver's classpath."""
    app = tmp_path / "reqs_app.py"
    app.write_text(REQS_APP)
    reqs = tmp_path / "requirements.txt"
    reqs.write_text("tabulate==0.8.10\n")
    r = jm(cluster, "run", str(app), "--requirements", str(reqs),
           "--packages", "com.example.jm:hello:1.0", "--repositories", maven_repo,
           "--conf", f"spark.jars.ivy={tmp_path / 'ivy'}", "--wait")
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-2000:])
    [jar] = [ln for ln in r.stdout.splitlines() if ln.startswith("JAR ")]
    assert "com.example.jm_hello-1.0.jar!/jm-hello.txt" in jar, jar
    assert "DRIVER 0.8.10" in r.stdout, r.stdout[-3000:]
    [line] = [ln for ln in r.stdout.splitlines() if ln.startswith("EXECUTOR ")]
    version, path, exe = line[len("EXECUTOR "):].split("|")
    assert version == "0.8.10", line
    assert "/jm-python/" in path and "/envs/" not in path, line  # the executor's copy
    assert path.startswith(spark.base) and "/jm-python/bin/python" in exe, (line, spark.base)


def test_an_entry_job_in_classic_mode_has_its_own_application(cluster, spark):
    s, b = http("POST", cluster.urls[2] + "/jobs", {
        "entry": "rdd_entry:main", "spark-mode": "classic", "name": "rdd-entry",
        "pyfiles": [os.path.join(ROOT, "tests", "e2e", "apps", "rdd_entry.py")]})
    assert s == 202, b
    done = poll(lambda: (lambda j: j if j["state"] in TERMINAL else None)(
        job(cluster, b["jobid"])), 240, interval=0.3, what="the classic entry job ended")
    assert done["state"] == "FINISHED", http("GET", f"{cluster.urls[0]}/jobs/{b['jobid']}"
                                             "/exceptions")[1]
    result = done["result"]
    assert result["total"] == 3 * sum(range(100)) and result["seen"] == 100
    assert result["name"] == "rdd-entry" and result["app"].startswith("app-")
    assert done["attempts"][-1]["spark-app-id"] == result["app"]
    assert spark.executors_of(result["app"])


def test_the_examples_run_unchanged_with_spark_submit(tmp_path):
    from jm.local.standalone import spark_env
    from jm.runtime.sparkjvm import spark_home
    env = spark_env()
    submit = [os.path.join(spark_home(), "bin", "spark-submit"), "--master", "local[1]",
              "--conf", "spark.ui.enabled=false"]
    r = subprocess.run(submit + [os.path.join(EXAMPLES, "pi.py"), "2"], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "Pi is roughly" in r.stdout, r.stderr[-2000:]
    r = subprocess.run(submit + ["--py-files", os.path.join(EXAMPLES, "etl_helpers.py"),
                                 os.path.join(EXAMPLES, "etl.py"), "-", str(tmp_path / "o")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "DE\t6\t76.5" in r.stdout, r.stderr[-2000:]


LONG_APP = """
import time
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
while True:
    spark.sparkContext.parallelize(range(4), 2).map(lambda x: time.sleep(0.3) or x).count()
"""


@pytest.mark.parametrize("fault", ["kill", "freeze"])
def test_application_fenced_across_a_lost_peer_and_gone_after_cancel(cluster, spark,
                                                                     tmp_path, fault):
    """kill: SIGKILL of the owner (its driver dies with it); freeze: SIGSTOP of the owner
    (its zygote kills the attempt's group, driver included, when the lease runs out)."""
    app = tmp_path / "forever.py"
    app.write_text(LONG_APP)
    name = f"fence-{fault}"
    s, b = http("POST", cluster.urls[1] + "/jobs", {"script": str(app), "name": name})
    assert s == 202, b
    jid = b["jobid"]
    first = poll(lambda: [a for a in spark.active_apps(name) if a["state"] == "RUNNING"], 180,
                 interval=0.2, what="the first attempt's application running")[0]["id"]
    poll(lambda: job(cluster, jid)["attempts"][-1].get("spark-app-id") == first, 60,
         what="the attempt's application id reported")

    most, stop = [0], threading.Event()
    seen: set = set()

    def watch():  # the master's application list, every 100 ms, until told to stop
        while not stop.is_set():
            try:
                apps = spark.active_apps(name)
            except OSError:
                apps = None
            if apps is not None:
                most[0] = max(most[0], len(apps))
                seen.update(a["id"] for a in apps)
            stop.wait(0.1)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    poll(lambda: first in seen, 30, what="the watcher sees the first application")
    owner = job(cluster, jid)["node"]
    # the driver's Spark local dir is in the attempt's run dir (not /tmp)
    assert glob.glob(os.path.join(run_dirs(cluster, owner, jid), "spark-local", "blockmgr-*"))
    victim = next(i for i, line in enumerate(cluster.lines)
                  if line.endswith(":" + owner.split(":")[1]))
    victim_pid = cluster.peer_pid(victim)
    survivor = (victim + 1) % 3
    os.kill(victim_pid, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
    try:
        second = poll(lambda: [a["id"] for a in spark.active_apps(name)
                               if a["id"] != first], 240, interval=0.2,
                      what="the next attempt's application registered")[0]
        poll(lambda: job(cluster, jid, survivor)["attempts"][-1].get("spark-app-id") == second,
             60, what="the new attempt's application id reported")
        if fault == "freeze":
            os.kill(victim_pid, signal.SIGCONT)  # back, fenced: it must not run the job
        s, b = http("PATCH", f"{cluster.urls[survivor]}/jobs/{jid}?mode=cancel")
        assert s == 202, b
        poll(lambda: job(cluster, jid, survivor)["state"] == "CANCELED", 60,
             what="the job cancelled")
        poll(lambda: not spark.active_apps(name), 30, interval=0.1,
             what="no application of the cancelled job at the master")
        # the attempt that ran to the cancel: its driver's scratch files went with it
        last = job(cluster, jid, survivor)["node"]
        assert glob.glob(run_dirs(cluster, last, jid))  # its run dir stays (with its logs)
        poll(lambda: not glob.glob(os.path.join(run_dirs(cluster, last, jid), "spark-local")),
             30, what="the last attempt's Spark local dir removed")
    finally:
        stop.set()
        watcher.join(5)
        if fault == "freeze":
            os.kill(victim_pid, signal.SIGCONT)
    assert most[0] <= 1, f"{most[0]} live applications of one job at once"
    assert {first, second} <= seen
    attempts = job(cluster, jid, survivor)["attempts"]
    assert [a.get("spark-app-id") for a in attempts][-2:] == [first, second]
    if fault == "kill":
        cluster.start_peer(victim)
    cluster.wait_healthy(victim)


def test_a_job_waiting_for_executors_says_so(cluster, spark, tmp_path):
    """Two applications want every core of the Spark cluster: the second waits and its
    attempt says why."""
    app = tmp_path / "hog.py"
    app.write_text(LONG_APP)
    ids = []
    for name in ("hog-1", "hog-2"):
        s, b = http("POST", cluster.urls[0] + "/jobs", {"script": str(app), "name": name})
        assert s == 202, b
        ids.append(b["jobid"])
    try:
        def waiting():
            notes = [job(cluster, j)["attempts"][-1].get("spark-waiting") for j in ids]
            return [n for n in notes if n]
        notes = poll(waiting, 180, interval=0.5, what="a waiting note on one of the jobs")
        assert "no executor granted by spark://127.0.0.1" in notes[0]
    finally:
        for j in ids:
            http("PATCH", f"{cluster.urls[0]}/jobs/{j}?mode=cancel")
        for j in ids:
            poll(lambda j=j: job(cluster, j)["state"] in TERMINAL, 60, what=f"{j} ended")
        poll(lambda: not [a for a in spark.active_apps() if a["name"].startswith("hog-")], 30,
             what="the hogs' applications gone")
