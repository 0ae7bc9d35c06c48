"""Clock faults (issue 15, point 5) on real peer processes: one peer's wall clock stepped
+30 s and -30 s while it runs (CLOCK_MONOTONIC untouched, as with an NTP step), and its
clocks running slow (x0.8) and fast (x1.25) on both the wall and the monotonic clock (a
bad oscillator), first on a follower, then on the leader (chaos/clock.py; why not
libfaketime is in its docstring).

Invariants, checked all along: no peer declared dead and no job's attempt (epoch)
changed (no false failover), no two attempts of a job at once and no probe stalled (no
false fencing), no job lost, restart delays honoured, and a failure-rate job never
fails because a clock step made old failures look recent.

Every peer runs under chaos.clock's environment from its start (neutral until faulted),
so the fault can go to whichever peer turns out to be the leader. The rates stay inside
chaos.clock.safe_rate_range (0.69, 1.43) of the default lease and heartbeat timeout;
rates outside it are refused (tests/unit/test_clock_use.py)."""
from __future__ import annotations

import email.utils
import os
import signal
import threading
import time
import urllib.request

import psutil
import pytest

from chaos.checks import check_single_attempt, check_survivors_untouched
from chaos.clock import ClockFault, read_probes, uptime
from tests.e2e.procs import ProcessCluster, submit
from tests.helpers import ROOT, http, poll

pytestmark = [pytest.mark.slow]

CHAOS = os.path.join(ROOT, "chaos") + "/"
FIX = os.path.join(ROOT, "tests", "integration") + "/"
LEASE, TIMEOUT = 2.0, 3.0     # the defaults: jobmanager.lease-timeout, heartbeat.timeout
DELAY = 2.0                   # the failing jobs' restart delay (s, on their peer's clock)
HOLD = 9.0                    # seconds a rate fault lasts (its drift shows in Date headers)
STEP_HOLD = 6.0               # seconds a step lasts: twice heartbeat.timeout
SLOW, FAST = 0.8, 1.25


def nodes(url: str) -> dict:
    return {n["id"]: n for n in http("GET", url + "/nodes")[1]["nodes"]}


def overview(url: str) -> dict:
    return {r["jid"]: r for r in http("GET", url + "/jobs/overview")[1]["jobs"]}


def peer_date(url: str) -> float:
    """The peer's wall clock as its HTTP Date header shows it (1 s resolution)."""
    with urllib.request.urlopen(url + "/healthz", timeout=10) as resp:
        return email.utils.parsedate_to_datetime(resp.headers["Date"]).timestamp()


def wall_offset(url: str) -> float:
    before = time.time()
    seen = peer_date(url)
    return seen - (before + time.time()) / 2


class Watch:
    """Checks the no-false-failover invariants while faults are applied."""

    def __init__(self, url: str, epochs: dict, peers: set) -> None:
        self.url, self.epochs, self.peers = url, epochs, peers
        self.errors: list[str] = []

    def check(self) -> None:
        ns = nodes(self.url)
        for nid in self.peers:
            n = ns.get(nid)
            if n is None or n["state"] != "ALIVE" or n["declared-dead-at"] != -1:
                self.errors.append(f"peer {nid} is {n and n['state']} at {uptime():.1f}")
        rows = overview(self.url)
        for jid, epoch in self.epochs.items():
            row = rows.get(jid)
            if row is None:
                self.errors.append(f"job {jid} lost")
            elif row["attempt"] != epoch:
                self.errors.append(f"job {jid} attempt {epoch} -> {row['attempt']} "
                                   f"(on {row['node']}) at {uptime():.1f}")

    def hold(self, seconds: float) -> None:
        """Keep checking for `seconds` (the fault's duration; not a wait for a state)."""
        end = time.monotonic() + seconds
        pause = threading.Event()
        while time.monotonic() < end:
            self.check()
            pause.wait(min(0.3, max(0.0, end - time.monotonic())))


def start_peer(c: ProcessCluster, i: int, fault: ClockFault) -> None:
    r = c.run("jobmanager.sh", "start", c.lines[i], env=fault.env(c.env))
    assert r.returncode == 0, r.stderr


def node_index(c: ProcessCluster, node_id: str) -> int:
    host, raft = node_id.rsplit(":", 1)
    return next(i for i, ln in enumerate(c.lines) if ln.startswith(host + ":")
                and ln.endswith(":" + raft))


def test_clock_steps_and_rates_on_a_follower_and_on_the_leader(tmp_path):
    base = tmp_path / "cluster"
    c = ProcessCluster(str(base), 3, {"jobmanager.executor.preload": "none",
                                      "restart-strategy.type": "none"})
    faults = [ClockFault(str(tmp_path / f"clock{i}")) for i in range(3)]
    probes_dir, runs_dir = str(tmp_path / "probes"), str(tmp_path / "runs")
    try:
        for i in range(3):
            start_peer(c, i, faults[i])
        for i in range(3):
            c.wait_healthy(i)
        url = c.urls[0]
        poll(lambda: len([n for n in nodes(url).values() if n["state"] == "ALIVE"]) == 3, 60,
             what="three live peers")

        # jobs on every peer: probes (stamped with the unfaked boot clock), long batch
        # jobs, streaming tickers, and failing jobs that restart every DELAY seconds, under
        # a failure-rate strategy that a clock step would trip (6 failures in 10 s)
        jobs = []
        for i in range(6):
            jobs.append(submit(c.urls[i % 3], {"entry": "clock:probe", "pyfiles": [CHAOS],
                                               "args": {"dir": probes_dir}}))
        for i in range(3):
            jobs.append(submit(c.urls[i], {"entry": "jobs_fixture:sleepy", "pyfiles": [FIX],
                                           "args": {"seconds": 600}}))
            jobs.append(submit(c.urls[i], {"entry": "jobs_fixture:ticker", "pyfiles": [FIX],
                                           "job-type": "streaming",
                                           "args": {"output": str(tmp_path / f"ticks{i}")}}))
        failing = [submit(c.urls[i], {
            "entry": "clock:always_fails", "pyfiles": [CHAOS], "args": {"dir": runs_dir},
            "restart-strategy": {"type": "failure-rate", "max-failures-per-interval": 6,
                                 "failure-rate-interval": "10 s", "delay": f"{DELAY:g} s"}})
            for i in range(3)]
        jobs += failing
        poll(lambda: all(r["state"] in ("RUNNING", "RESTARTING")
                         for r in overview(url).values()) and len(overview(url)) == len(jobs),
             90, interval=0.2, what="every job running")
        # the fault reaches every process of a peer: the zygote and the job processes
        checked, dirs = 0, {f.directory for f in faults}
        for pid in c.pids():
            for p in [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]:
                try:
                    env = p.environ()
                except psutil.NoSuchProcess:
                    continue  # a failing job's run that just ended
                assert env.get("JM_CLOCK_DIR") in dirs and env.get("PYTHONPATH"), p.cmdline()
                checked += 1
        assert checked >= 3 + 3 + 12, checked  # peers, zygotes, the long-running jobs
        rows = overview(url)
        epochs = {jid: r["attempt"] for jid, r in rows.items()}
        ns = nodes(url)
        watch = Watch(url, epochs, set(ns))
        leader = next(nid for nid, n in ns.items() if n["leader"])
        # the follower to fault: one running a failing job, so a step meets its windows
        followers = [nid for nid in ns if nid != leader]
        hosts = {rows[j]["node"] for j in failing}
        follower = next((f for f in followers if f in hosts), followers[0])
        watch.check()
        assert not watch.errors, watch.errors

        for role, target in (("follower", follower), ("leader", leader)):
            i = node_index(c, target)
            fault, turl = faults[i], c.urls[i]
            for step in (30.0, -30.0):
                base_off = wall_offset(turl)
                fault.jump(step)
                poll(lambda: abs(wall_offset(turl) - base_off - step) < 2.5, 10,
                     interval=0.2, what=f"{role} {target} stepped {step:+g} s")
                watch.hold(STEP_HOLD)
                fault.jump(0.0)
                poll(lambda: abs(wall_offset(turl) - base_off) < 2.5, 10, interval=0.2,
                     what=f"{role} {target} stepped back")
            for rate in (SLOW, FAST):
                base_off = wall_offset(turl)
                fault.set_rate(rate, LEASE, TIMEOUT)
                watch.hold(HOLD)
                drift = wall_offset(turl) - base_off  # about (rate - 1) * HOLD
                assert (drift < -0.5) if rate < 1 else (drift > 0.5), (role, rate, drift)
                fault.set_rate(1.0, LEASE, TIMEOUT)
            if role == "follower":
                assert nodes(url)[leader]["leader"], "the leader changed: fault the new one"
        assert not watch.errors, watch.errors[:20]

        # nothing lost, nothing in an unexpected state
        rows = overview(url)
        assert set(jobs) <= set(rows)
        bad = {j: rows[j]["state"] for j in jobs if j not in failing
               and rows[j]["state"] != "RUNNING"}
        bad.update({j: rows[j]["state"] for j in failing
                    if rows[j]["state"] not in ("RUNNING", "RESTARTING")})
        assert not bad, bad

        # at most one attempt at a time, and no probe stalled (no false fencing)
        probes = read_probes(probes_dir)
        assert len(probes) == 6 and all(len(v) > 50 for v in probes.values())
        errors = check_single_attempt(probes) + check_survivors_untouched(probes, [], 0.5,
                                                                         gap=2.5)
        assert not errors, errors

        # restart delays honoured: DELAY seconds on the peer's clock, at most 1.25x fast
        runs = read_probes(runs_dir, ".runs")
        assert set(runs) == set(failing)
        gaps = [b[2] - a[2] for rs in runs.values() for a, b in zip(rs, rs[1:])]
        assert len(gaps) >= 30, gaps
        assert min(gaps) >= DELAY / FAST - 0.1, sorted(gaps)[:5]
    finally:
        c.stop()
        for pid in c.pids():  # stop() kills by pid file; belt and braces
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
