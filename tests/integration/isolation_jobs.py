"""Job entry points for tests/integration/test_job_isolation.py (run in job processes)."""
import os
import resource
import threading
import time


def whoami(ctx):
    """What the job process runs with: user, limits, oom_score_adj, process group."""
    with open("/proc/self/oom_score_adj") as f:
        adj = int(f.read())
    return {"uid": os.getuid(), "gid": os.getgid(), "home": os.environ.get("HOME"),
            "nproc": list(resource.getrlimit(resource.RLIMIT_NPROC)),
            "nofile": list(resource.getrlimit(resource.RLIMIT_NOFILE)),
            "fsize": list(resource.getrlimit(resource.RLIMIT_FSIZE)),
            "as": list(resource.getrlimit(resource.RLIMIT_AS)),
            "oom_score_adj": adj, "pgid": os.getpgid(0), "sid": os.getsid(0)}


def many_threads(ctx):
    """Starts threads until the process limit says no (a fork bomb, politely)."""
    stop = threading.Event()
    started = []
    try:
        for _ in range(int(ctx.args.get("max", 10000))):
            t = threading.Thread(target=stop.wait, daemon=True)
            t.start()
            started.append(t)
    finally:
        stop.set()
    return {"started": len(started)}


def big_file(ctx):
    """Writes one file past jobmanager.executor.limits.file-size."""
    path = ctx.args["path"]
    chunk = b"x" * 65536
    with open(path, "wb") as f:
        for _ in range(int(ctx.args.get("chunks", 64))):
            f.write(chunk)
            f.flush()
    return {"size": os.path.getsize(path)}


def kill_everyone(ctx):
    """os.kill(-1, SIGKILL): every process this job's user may signal. Refuses to run as
    root (it would kill the whole host, the test runner included)."""
    if os.getuid() == 0 or os.geteuid() == 0:
        raise RuntimeError("refusing os.kill(-1, 9) as root")
    os.kill(-1, 9)
    return "still here"


def ticks(ctx):
    """Appends `time.monotonic()` to a file every 20 ms (the job's sign of life)."""
    path = ctx.args["path"]
    end = time.monotonic() + float(ctx.args.get("seconds", 60))
    while time.monotonic() < end:
        with open(path, "a") as f:
            f.write(f"{time.monotonic()}\n")
        time.sleep(0.02)
    return "done"


def spark_probe(ctx):
    """A Spark Connect client job: what it needs (threads, files, address space)."""
    n = ctx.spark.range(1000).count()
    status = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmPeak", "VmSize", "VmRSS", "Threads"):
                status[key] = value.strip()
    return {"count": n, "uid": os.getuid(), "fds": len(os.listdir("/proc/self/fd")),
            **status}


def environment(ctx):
    """The names of the job process's environment variables."""
    return sorted(os.environ)


def kill_my_peer(ctx):
    """A job that takes its peer down as it starts (as one exhausting the host's memory
    would): SIGKILL to its zygote's parent, the peer."""
    import signal
    with open(f"/proc/{os.getppid()}/stat") as f:  # the zygote's parent: the peer
        peer = int(f.read().rsplit(")", 1)[1].split()[1])
    print(f"killing my peer {peer}", flush=True)
    os.kill(peer, signal.SIGKILL)
    time.sleep(30)


def peer_files(ctx):
    """Which of the peer's files (args["paths"]) this job can read: {path: "read" or the
    error}."""
    out = {}
    for path in ctx.args["paths"]:
        try:
            with open(path, "rb") as f:
                f.read(1)
            out[path] = "read"
        except OSError as exc:
            out[path] = type(exc).__name__
    return out


def private_ticker(ctx):
    """jobs_fixture.ticker importing nothing more (a job run as another user may not reach
    the interpreter's library where the test machine keeps it private): the last commit
    read here instead of by jm.cluster.jobs.savepoint."""
    from jobs_fixture import ticker

    def last_committed(query_dir):
        try:
            names = os.listdir(os.path.join(query_dir, "commits"))
        except FileNotFoundError:
            return -1
        return max((int(n) for n in names if n.isdigit()), default=-1)
    return ticker(ctx, last_committed)

def my_cgroup(ctx):
    """The memory limit and CPU weight (v2) or shares (v1) of the cgroups this job process
    is in: {"memory": bytes or None, "cpu": str or None, "paths": [...]}."""
    out = {"memory": None, "cpu": None, "paths": []}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            names = controllers.split(",") if controllers else [""]
            for name in names:
                base = os.path.join("/sys/fs/cgroup", name) + path
                out["paths"].append(base)
                for fname, key in (("memory.max", "memory"),
                                   ("memory.limit_in_bytes", "memory"),
                                   ("cpu.weight", "cpu"), ("cpu.shares", "cpu")):
                    try:
                        with open(os.path.join(base, fname)) as g:
                            value = g.read().strip()
                    except OSError:
                        continue
                    if key == "memory" and value.isdigit():
                        out["memory"] = int(value)
                    elif key == "cpu":
                        out["cpu"] = value
    return out
