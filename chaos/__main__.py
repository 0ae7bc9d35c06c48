"""`python -m chaos run [options]`: a chaos scenario against real peer processes.

    python -m chaos run                        # ~2 min: kills, pauses, partitions (root)
    python -m chaos run --duration 900 --jobs 30 --seed 7 --out /tmp/chaos-long
    python -m chaos run --faults kill,kill-leader,pause   # no namespaces needed
    python -m chaos run --peers 9 --faults stop-leader --min-faults 5   # graceful stops
    python -m chaos run --streaming 1 --faults kill-owner,pause   # a real Spark streaming
        job fed known events; its peer is killed again and again; its sink is checked

It prints the checks, writes report.json and timeline.png into --out, and exits 1 when
a check fails (2 on a usage error). The peers' data and logs (a temporary folder) are
removed after a pass and kept after a failure (its path in the output and the report).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import random
import shutil
import sys
import threading
import time
from typing import Callable, Optional

from chaos import checks, hostfaults
from chaos.faults import FAULTS, GROUP_FAULTS, HOST_FAULTS, inject
from chaos.harness import ChaosCluster, Load, Scenario, poll_for, call
from chaos.netns import available
from chaos.streaming import EventFeed, wait_sink


def read_probes(directory: str) -> dict:
    probes: dict = {}
    if not os.path.isdir(directory):
        return probes
    for name in os.listdir(directory):
        with open(os.path.join(directory, name)) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 4:
                    try:
                        probes.setdefault(parts[0], []).append((int(parts[1]), parts[2],
                                                               float(parts[3])))
                    except ValueError:
                        pass  # a line cut by SIGKILL
    return probes


def rows(url: str) -> Optional[list]:
    """GET /jobs/overview's jobs, or None when the peer answers an error (a 503 while it
    has no leader just after the faults: the waits ask again)."""
    status, body = call("GET", url + "/jobs/overview", timeout=10)
    return body.get("jobs") if status == 200 and isinstance(body, dict) else None


def state(url: str, jid: str) -> Optional[str]:
    status, body = call("GET", url + f"/jobs/{jid}")
    return body.get("state") if status == 200 and isinstance(body, dict) else None


def start_streaming(c: ChaosCluster, sc: Scenario) -> tuple[list, list]:
    """Submit sc.streaming streaming example jobs, each fed by its own EventFeed."""
    feeds, jobs = [], []
    example = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "examples", "streaming_events.py")
    for k in range(sc.streaming):
        # a file a second: a moved job has less to catch up with (its peer's Spark JVM
        # may take a minute to restart on a busy machine) in micro-batches of 4 files
        feed = EventFeed(os.path.join(c.base, f"events{k}"), period=1.0, seed=k)
        status, body = call("POST", c.urls[k % sc.peers] + "/jobs", {
            "name": f"streaming-{k}", "entry": "streaming_events:main", "pyfiles": [example],
            "job-type": "streaming",
            "args": {"input": feed.dir, "output": os.path.join(c.base, f"agg{k}"),
                     "trigger": "500 milliseconds"}})
        if status != 202:
            raise RuntimeError(f"streaming submission failed: {status} {body}")
        feed.start()
        feeds.append(feed)
        jobs.append(body["jobid"])
    if jobs:
        poll_for(lambda: all(state(c.urls[0], j) == "RUNNING" for j in jobs), 180,
                 "streaming jobs running", interval=0.5)
    return feeds, jobs


def finish_streaming(c: ChaosCluster, feeds: list, jobs: list, log) -> Optional[dict]:
    """Stop the feeds, wait for every window in every sink, check them exactly once."""
    if not jobs:
        return None
    errors, moves = [], {}
    for k, (feed, jid) in enumerate(zip(feeds, jobs)):
        feed.finish()
        res = wait_sink(c.sql_rows, os.path.join(c.base, f"agg{k}"), feed.events)
        job = call("GET", c.alive_url() + f"/jobs/{jid}")[1]
        moves[jid] = len(job.get("attempts") or []) - 1
        log(f"streaming {jid[:8]}: {res['windows']} windows expected, {res['rows']} rows, "
            f"{res['duplicated']} duplicated, {res['missing']} missing, {res['wrong']} wrong; "
            f"{moves[jid]} moves/restarts, {job.get('state')}")
        errors += [f"{jid[:8]}: {e}" for e in res["errors"]]
        if job.get("state") != "RUNNING":
            errors.append(f"{jid[:8]}: {job.get('state')} at the end")
    return {"ok": not errors, "errors": errors, "attempts": moves,
            "events": sum(len(f.events) for f in feeds)}


def plot(path: str, probes: dict, faults: list[dict], nodes: list[str], t0: float) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    colours = {n: plt.cm.tab10(i % 10) for i, n in enumerate(nodes)}
    jobs = sorted(probes)
    fig, ax = plt.subplots(figsize=(12, max(3, 0.3 * len(jobs) + 1)))
    for row, job in enumerate(jobs):
        for attempt, (node, lo, hi) in sorted(checks.attempt_spans(probes[job]).items()):
            ax.broken_barh([(lo - t0, max(hi - lo, 0.1))], (row - 0.4, 0.8),
                           color=colours.get(node, "grey"))
    for f in faults:
        ax.axvspan(f["start"] - t0, f["end"] - t0, color="red", alpha=0.12)
        ax.text(f["start"] - t0, len(jobs) + 0.2, f"{f['kind']} {f['node']}", fontsize=7,
                rotation=30)
    ax.set_yticks(range(len(jobs)))
    ax.set_yticklabels([j[:8] for j in jobs], fontsize=6)
    ax.set_xlabel("seconds since start")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colours.values()]
    ax.legend(handles, list(colours), loc="upper right", fontsize=7)
    ax.set_title("probe jobs: which peer ran each attempt (red: faults)", pad=40)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def run(sc: Scenario, out: str) -> int:
    os.makedirs(out, exist_ok=True)
    rnd = random.Random(sc.seed)
    c = ChaosCluster(sc)
    t0 = time.time()
    log, lines = _logger(t0)
    feeds, stop = [], threading.Event()
    if {"disk-full", "power-loss"} & set(sc.faults):
        c.before_start.append(lambda: hostfaults.prepare_disks(
            c, "disk-full" in sc.faults, "power-loss" in sc.faults))
    try:
        c.start()
        log(f"{sc.peers} peers up: {', '.join(c.urls)}")
        probe_jobs = _start_probes(c, sc)
        log(f"{sc.jobs} probe jobs running")
        feeds, streaming_jobs = start_streaming(c, sc)
        if streaming_jobs:
            log(f"{len(streaming_jobs)} streaming jobs running: {', '.join(streaming_jobs)}")
        load = Load(c, sc.load_clients, sc.load_rate, stop)
        load.start()
        timeout = float(c.settings_value("heartbeat.timeout"))
        lease = float(c.settings_value("jobmanager.lease-timeout"))
        faults = _inject_faults(c, sc, rnd, (timeout, lease), feeds,
                                _streaming_owner(c, streaming_jobs), log)
        stop.set()
        load.join(60)
        final = _settle(c, sc, probe_jobs, log)
        streaming = finish_streaming(c, feeds, streaming_jobs, log)
    except BaseException:
        _last_words(c.base)
        raise
    finally:
        stop.set()
        for feed in feeds:
            feed.halt.set()
        c.stop()
    probes = read_probes(c.probe_dir)
    results = checks.run_all(probes, faults, final, load.acked, probe_jobs, set(),
                             timeout + 5.0)
    if streaming:
        results["streaming exactly-once"] = streaming
    ok = all(r["ok"] for r in results.values())
    kept = _keep_or_remove(c.base, ok)
    report = {"ok": ok, "scenario": sc.__dict__, "faults": faults, "checks": results,
              "acknowledged": len(load.acked), "unacknowledged": len(load.unacked),
              "log": lines, "base": c.base, "base-kept": kept}
    _write_report(out, report, probes, c.nodes, t0)
    _print_results(results)
    print(f"{len(faults)} faults, {len(load.acked)} load jobs acknowledged; report in {out}"
          + (f"; the peers' data and logs in {c.base}" if kept else ""))
    return 0 if ok else 1


def _logger(t0: float) -> tuple[Callable[[str], None], list[str]]:
    """A log printing each message with the seconds since t0, and its lines (kept for
    the report)."""
    lines: list[str] = []

    def log(msg: str) -> None:
        line = f"[{time.time() - t0:7.2f}s] {msg}"
        lines.append(line)
        print(line, flush=True)
    return log, lines


def _start_probes(c: ChaosCluster, sc: Scenario) -> list[str]:
    """Submit sc.jobs probe jobs (chaos/probe.py) round the peers; their ids once every
    one runs."""
    probe_jobs = []
    for k in range(sc.jobs):
        status, body = call("POST", c.urls[k % sc.peers] + "/jobs",
                            {"name": f"probe-{k}", "entry": "probe:main",
                             "pyfiles": [os.path.join(os.path.dirname(__file__)) + "/"],
                             "args": {"dir": c.probe_dir}})
        if status != 202:
            raise RuntimeError(f"probe submission failed: {status} {body}")
        probe_jobs.append(body["jobid"])
    poll_for(lambda: sum(r["state"] == "RUNNING" for r in rows(c.urls[0]) or ()) == sc.jobs,
             60, "probe jobs running")
    return probe_jobs


def _streaming_owner(c: ChaosCluster,
                     streaming_jobs: list) -> Callable[[], Optional[int]]:
    """The index of the peer running the first streaming job (kill-owner's target)."""
    def owner() -> Optional[int]:
        if not streaming_jobs:
            return None
        j = call("GET", c.alive_url() + f"/jobs/{streaming_jobs[0]}")[1]
        return c.index_of(j.get("node") or "")
    return owner


def _inject_faults(c: ChaosCluster, sc: Scenario, rnd: random.Random,
                   timeouts: tuple[float, float], feeds: list,
                   owner: Callable[[], Optional[int]], log) -> list[dict]:
    """The fault schedule: each kind once (in a random order), then at random, one every
    sc.fault_every seconds, for sc.duration and on until sc.min_faults were made; the
    cluster whole again after each. The fault records."""
    timeout, lease = timeouts  # heartbeat.timeout, jobmanager.lease-timeout
    faults: list[dict] = []
    end_at = time.time() + sc.duration
    first = rnd.sample(list(sc.faults), len(sc.faults))
    # at least min_faults, however long each takes (a restarted peer's Spark JVM is
    # slow to start on a busy machine): the test asks for a count, not for speed
    injected = 0  # faults made (a power cut is one fault, with a record per peer)
    while time.time() < end_at or injected < sc.min_faults:
        if time.time() >= end_at:  # past the duration: a bounded amount of events,
            for feed in feeds:      # however long the remaining faults take
                feed.halt.set()
        # each kind once (in a random order), then at random
        kind = first[injected] if injected < len(first) else rnd.choice(sc.faults)
        if sc.streaming and kind.startswith("kill") and injected:
            # a peer besides the owner whose Spark is ready, for the job to move to
            # (placement prefers them): a peer restarted by the last kill may still
            # be starting its JVM; not every peer's is needed
            c.wait_spark(enough=2)
        injected += 1
        hold = 0.0 if kind == "stop-leader" else \
            rnd.uniform(timeout + 1, timeout + 4) if kind != "pause" else \
            rnd.uniform(lease + 0.5, timeout + 4)
        faults.extend(inject(c, kind, rnd, hold, log, owner))
        poll_for(lambda: len(c.pids) == sc.peers and c.leader_index() is not None, 60,
                 "cluster whole again")
        time.sleep(max(0.0, sc.fault_every - hold))  # fault schedule: spacing
    return faults


def _settle(c: ChaosCluster, sc: Scenario, probe_jobs: list[str], log) -> dict:
    """After the faults: wait (sc.settle) for every probe job to run again; the final
    overview rows by job id, each probe's logged."""
    log("faults over; waiting for every probe job to run again")
    try:
        poll_for(lambda: (lambda got: got is not None and all(
            r["state"] == "RUNNING" for r in got if r["jid"] in set(probe_jobs)))(
                rows(c.alive_url())), sc.settle, "probes running", interval=0.5)
    except TimeoutError as exc:
        log(str(exc))
    time.sleep(1.0)  # let every probe write lines from its current attempt
    final = {r["jid"]: r for r in poll_for(lambda: rows(c.alive_url()), 60, "the overview")}
    for j in probe_jobs:
        row = final.get(j, {})
        log(f"probe {j[:8]}: {row.get('state')} on {row.get('node')} attempt "
            f"{row.get('attempt')} restarts {row.get('restarts')}")
        if row.get("state") != "RUNNING":
            detail = call("GET", c.alive_url() + f"/jobs/{j}")[1]
            log(f"probe {j}: {detail.get('state')} attempts {detail.get('attempts')}")
    return final


def _last_words(base: str) -> None:
    """The run ended early: where its data is, and each peer log's last line (a peer that
    stopped says why there)."""
    print(f"the peers' data and logs are kept in {base}", file=sys.stderr)
    for path in sorted(glob.glob(os.path.join(base, "log", "*.log"))):
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 2000))
            tail = f.read().decode(errors="replace").strip().splitlines()
        print(f"  {os.path.basename(path)}: {tail[-1] if tail else '(empty)'}", file=sys.stderr)


def _keep_or_remove(base: str, ok: bool) -> bool:
    """The peers' data and logs: kept to look into after a failure (or while something
    is mounted under them), removed after a pass. Whether they are kept."""
    kept = not ok or any(f" {base}" in ln for ln in open("/proc/mounts"))
    if not kept:
        shutil.rmtree(base, ignore_errors=True)
    return kept


def _write_report(out: str, report: dict, probes: dict, nodes: list[str],
                  t0: float) -> None:
    """report.json and timeline.png (when matplotlib is installed) into `out`."""
    with open(os.path.join(out, "report.json"), "w") as f:
        json.dump(report, f, indent=1, default=list)
    try:
        plot(os.path.join(out, "timeline.png"), probes, report["faults"], nodes, t0)
    except ImportError:
        print("matplotlib is not installed: no timeline.png", file=sys.stderr)


def _print_results(results: dict) -> None:
    for name, r in results.items():
        print(f"{'PASS' if r['ok'] else 'FAIL'}  {name}" + ("" if r["ok"] else
                                                            f": {r['errors'][:3]}"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m chaos")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a chaos scenario")
    r.add_argument("--peers", type=int, default=3)
    r.add_argument("--jobs", type=int, default=12)
    r.add_argument("--duration", type=float, default=90.0)
    r.add_argument("--faults", default=",".join(FAULTS))
    r.add_argument("--fault-every", type=float, default=12.0)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--streaming", type=int, default=0,
                   help="streaming example jobs fed known events (starts Spark on each peer)")
    r.add_argument("--min-faults", type=int, default=0,
                   help="go on past --duration until this many faults were injected")
    r.add_argument("--hosts", action="store_true",
                   help="peers on network-namespace hosts with their own sshd, started over "
                        "ssh by bin/start-cluster.sh (root); enables the faults "
                        + ", ".join(HOST_FAULTS))
    r.add_argument("--out", default="chaos-report")
    r.add_argument("-D", dest="overrides", action="append", default=[])
    args = ap.parse_args(argv)
    faults = tuple(f for f in args.faults.split(",") if f)
    known = FAULTS + GROUP_FAULTS + (HOST_FAULTS if args.hosts else ())
    bad = [f for f in faults if f not in known]
    if bad or not faults:
        print(f"chaos: unknown fault(s) {bad}; choose from {', '.join(known)}"
              + ("" if args.hosts else f" ({', '.join(HOST_FAULTS)} need --hosts)"),
              file=sys.stderr)
        return 2
    if args.hosts:
        from chaos.hosts import available as hosts_available
        reason = hosts_available()
        if reason:
            print(f"chaos: --hosts: {reason}", file=sys.stderr)
            return 2
    if any(f.startswith("partition") for f in faults) and not available():
        print("chaos: partitions need root and iproute2 (ip netns); drop 'partition' from "
              "--faults", file=sys.stderr)
        return 2
    settings = {}
    for item in args.overrides:
        k, _, v = item.partition("=")
        settings[k] = v
    sc = Scenario(peers=args.peers, jobs=args.jobs, duration=args.duration, faults=faults,
                  fault_every=args.fault_every, seed=args.seed, streaming=args.streaming,
                  min_faults=args.min_faults, hosts=args.hosts, settings=settings)
    return run(sc, args.out)


if __name__ == "__main__":
    sys.exit(main())
