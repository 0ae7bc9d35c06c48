"""How long a Spark Connect server takes to start and answer its first query, and the CPU
its JVM spends on that, with and without the class-data archive (spark.class-archive,
jm/runtime/classarchive.py) and the tests' JVM flags; runs interleaved, medians printed.

    .venv/bin/python bench/jvmstart.py [--rounds 3] [--archive PATH] [--out FILE]

The archive is made first when PATH does not exist (its making is timed too).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from jm.runtime.classarchive import STARTED, start_server  # noqa: E402
from jm.runtime.ports import free_port  # noqa: E402

FAST = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _tree_cpu(pid: int) -> float:
    """CPU seconds of a process and its children (the JVM under spark-class)."""
    total = 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    kids = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return total + sum(_tree_cpu(int(k)) for k in kids.split())


def one(opts: str) -> dict:
    """Start a server with these JVM options, run SELECT 1 through Spark Connect, stop it."""
    port = free_port()
    t0 = time.monotonic()
    proc = start_server(port, opts)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if STARTED in line:
                break
        started = time.monotonic() - t0
        from pyspark.sql import SparkSession
        spark = SparkSession.builder.remote(f"sc://127.0.0.1:{port}").getOrCreate()
        spark.sql("SELECT 1").collect()
        first = time.monotonic() - t0 - started
        cpu = _tree_cpu(proc.pid)
        spark.stop()
    finally:
        proc.terminate()
        proc.wait()
    return {"started": started, "first-query": first, "jvm-cpu": cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--archive", default=os.path.join(ROOT, ".cache", "spark-classes.jsa"))
    ap.add_argument("--out")
    args = ap.parse_args()
    out: dict = {}
    if not os.path.exists(args.archive):
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "jm.runtime.classarchive", args.archive,
                        "--java-opts", FAST], check=True, cwd=ROOT)
        out["archive-made-s"] = round(time.monotonic() - t0, 1)
    share = f"-XX:SharedArchiveFile={args.archive}"
    configs = {"default": "", "default+archive": share, "fast": FAST,
               "fast+archive": f"{FAST} {share}"}
    runs: dict = {k: [] for k in configs}
    for _ in range(args.rounds):  # interleaved: the machine's drift hits each alike
        for name, opts in configs.items():
            runs[name].append(one(opts))
    for name, rs in runs.items():
        out[name] = {k: round(statistics.median(r[k] for r in rs), 1) for k in rs[0]}
        print(f"{name:16} started {out[name]['started']:5.1f} s  first query "
              f"{out[name]['first-query']:5.1f} s  JVM CPU {out[name]['jvm-cpu']:5.1f} s")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
