"""Clock use (issue 15, point 5): no decision compares times stamped by two hosts, and
wall clock steps move no delay or window. The pure parts, plus the clock-rate bound that
keeps fencing safe (chaos/clock.py)."""
import asyncio
import contextlib
import json
import os
import time

import pytest

from chaos.clock import ClockFault, lease_safe, remove_stale_shm, safe_rate_range
from jm.cluster.jobs.jobservices import JobEnv
from jm.cluster.members.lease import Lease
from jm.config import Config
from jm.policy.jobs.restart import RestartStrategy, RestartTracker, on_failure
from jm.policy.jobs.retention import expired_jobs, track_ended
from raft import commands as c
from raft.state import ClusterState


def _ended(st: ClusterState, job: str, owner_time: float) -> None:
    """A job that ended with an end_time stamped by its owner's (skewed) wall clock."""
    st.apply(c.SubmitJob(job, {}, owner_time))
    st.apply(c.CancelJob(job, owner_time))


# ---- retention: counted from when the deciding peer saw the end ------------------------

def test_retention_ignores_end_times_stamped_by_skewed_owners():
    st = ClusterState()
    _ended(st, "ahead", 1e12)     # an owner a few millennia ahead
    _ended(st, "behind", -1e9)    # an owner decades behind
    seen = track_ended(st, {}, now=500.0)  # the leader's monotonic clock
    assert seen == {"ahead": 500.0, "behind": 500.0}
    # neither is forgotten early (the skewed clock behind) or kept forever (ahead)
    assert expired_jobs(seen, 500.0 + 60.0, expiration=60.0, capacity=10) == []
    assert expired_jobs(seen, 500.0 + 60.1, expiration=60.0, capacity=10) == ["ahead",
                                                                              "behind"]


def test_track_ended_keeps_first_sight_and_drops_forgotten_jobs():
    st = ClusterState()
    _ended(st, "a", 1.0)
    seen = track_ended(st, {}, now=10.0)
    _ended(st, "b", 0.5)  # ended later, though its owner stamped an earlier time
    st.apply(c.SubmitJob("live", {}, 0.0))
    seen = track_ended(st, seen, now=20.0)
    assert seen == {"a": 10.0, "b": 20.0}  # "a" keeps its first sight; "live" is not ended
    # capacity evicts the earliest seen first, whatever the owners stamped
    assert expired_jobs(seen, 21.0, expiration=1000.0, capacity=1) == ["a"]
    st.apply(c.PurgeJobs(("a",), 30.0))
    assert track_ended(st, seen, now=30.0) == {"b": 20.0}


def test_capacity_ties_keep_the_order_first_seen():
    st = ClusterState()
    for job, t in (("x", 30.0), ("y", 10.0), ("z", 20.0)):  # owners' stamps out of order
        _ended(st, job, t)
    seen = track_ended(st, {}, now=5.0)
    assert expired_jobs(seen, 5.0, expiration=100.0, capacity=1) == ["x", "y"]


class _Raft:
    """What ResourceManager._purge needs of the Raft host."""

    def __init__(self, st: ClusterState) -> None:
        self.st, self.sent = st, []
        self.apply_hooks, self.load_hooks = [], []

    def subscribe(self) -> asyncio.Event:
        return asyncio.Event()

    @contextlib.contextmanager
    def read(self):
        yield self.st

    async def submit(self, command, timeout):
        self.sent.append(command)
        return self.st.apply(command)


def test_the_leader_purges_on_its_own_monotonic_clock_not_the_wall_clocks():
    from jm.cluster.members.resourcemanager import ResourceManager
    st = ClusterState()
    _ended(st, "j", 100.0)
    raft, mono = _Raft(st), [1000.0]
    # the leader's wall clock is a day ahead of the owner's stamp: irrelevant
    rm = ResourceManager(raft, 3.0, 1.0, wall_clock=lambda: 100.0 + 86400,
                         monotonic=lambda: mono[0], expiration=60.0, purge_every=10.0)

    async def rounds():
        await rm._purge()          # first look at 1000: counting starts
        mono[0] += 59.0
        await rm._purge()          # 59 s later: kept
        assert "j" in st.jobs and not raft.sent
        mono[0] += 11.0
        await rm._purge()          # 70 s after it was first seen ended: forgotten
    asyncio.run(rounds())
    assert "j" not in st.jobs and [type(x).__name__ for x in raft.sent] == ["PurgeJobs"]


# ---- restart strategy: monotonic time, one host --------------------------------------

def test_job_env_measures_restarts_on_the_monotonic_clock():
    env = JobEnv("n", None, None, None, None, lambda: None, None, "", "", time.time)
    assert env.monotonic is time.monotonic and env.clock is time.time


def test_failure_rate_window_counts_monotonic_seconds():
    s = RestartStrategy("failure-rate", {"max-failures-per-interval": 1,
                                         "failure-rate-interval": 10.0, "delay": 1.0})
    t, d = on_failure(s, RestartTracker(), 100.0)
    assert d.restart and d.delay == 1.0
    t, d = on_failure(s, t, 110.5)      # 10.5 s later on the same monotonic clock
    assert d.restart
    t, d = on_failure(s, t, 112.0)      # two failures within 10 s
    assert not d.restart


# ---- heartbeats: a wall clock step back must not hide a heartbeat ------------------------

def test_heartbeat_stamps_increase_across_a_wall_clock_step_back():
    lease = Lease(None, "n1", lambda: None, lambda now: c.Heartbeat("n1", now), 0.5, 2.0,
                  1.0, None, None)
    first = lease.stamp(1000.0)
    after_step = [lease.stamp(970.0 + i * 0.5) for i in range(3)]  # stepped back 30 s
    assert first < after_step[0] < after_step[1] < after_step[2]
    assert lease.stamp(1000.5) == 1000.5  # the wall clock is used again once it is ahead


def test_declaration_is_stale_after_a_heartbeat_sent_after_a_step_back():
    st = ClusterState()
    st.apply(c.RegisterPeer("n1", "h", 1, 2, 10, 4, 1000.0))
    lease = Lease(None, "n1", lambda: None, lambda now: c.Heartbeat("n1", now), 0.5, 2.0,
                  1.0, None, None)
    st.apply(c.Heartbeat("n1", lease.stamp(1001.0)))
    seen = (st.peers["n1"].last_heartbeat, st.peers["n1"].registered_at)  # the decision
    st.apply(c.Heartbeat("n1", lease.stamp(971.5)))  # the peer's clock stepped back 30 s
    assert not st.apply(c.DeclarePeerDead("n1", 1005.0, *seen)).ok  # heard from: stale
    # with raw wall stamps the heartbeat would not have counted:
    st2 = ClusterState()
    st2.apply(c.RegisterPeer("n1", "h", 1, 2, 10, 4, 1000.0))
    st2.apply(c.Heartbeat("n1", 1001.0))
    seen2 = (st2.peers["n1"].last_heartbeat, st2.peers["n1"].registered_at)
    st2.apply(c.Heartbeat("n1", 971.5))
    assert st2.apply(c.DeclarePeerDead("n1", 1005.0, *seen2)).ok


# ---- the clock-rate bound for fencing --------------------------------------------------

def _defaults() -> Config:
    return Config({}, "/tmp")


def test_default_configuration_is_safe_for_rates_between_0_69_and_1_43():
    conf = _defaults()
    lease, timeout = conf["jobmanager.lease-timeout"], conf["heartbeat.timeout"]
    assert (lease, timeout) == (2.0, 3.0)
    low, high = safe_rate_range(lease, timeout)
    assert low == pytest.approx(2 / 2.9) and high == pytest.approx(3 / 2.1)
    for rate in (0.8, 1.0, 1.25):  # the rates tests/e2e/test_clock.py uses
        assert lease_safe(rate, 1.0, lease, timeout)   # a skewed follower
        assert lease_safe(1.0, rate, lease, timeout)   # a skewed leader
    # a slow peer's lease lasts longer than the leader waits: two attempts possible
    assert not lease_safe(0.5, 1.0, lease, timeout)
    # a fast leader declares healthy-clocked peers dead before their leases ran out
    assert not lease_safe(1.0, 2.0, lease, timeout)
    assert not lease_safe(1.0, 1.5, lease, timeout)


def test_the_configuration_check_alone_leaves_only_a_small_rate_margin():
    # the tightest configuration Config._check accepts: timeout = lease + 0.5 s
    conf = Config({"jobmanager.lease-timeout": "2 s", "heartbeat.timeout": "2500 ms"}, "/tmp")
    low, high = safe_rate_range(conf["jobmanager.lease-timeout"], conf["heartbeat.timeout"])
    assert 0.83 < low < 0.84 and 1.19 < high < 1.2
    assert not lease_safe(0.8, 1.0, 2.0, 2.5)


def test_a_clock_fault_refuses_an_unsafe_rate(tmp_path):
    fault = ClockFault(str(tmp_path))
    with pytest.raises(ValueError, match="outside the safe range"):
        fault.set_rate(0.5, 2.0, 3.0)
    with pytest.raises(ValueError, match="outside the safe range"):
        fault.set_rate(2.0, 2.0, 3.0)
    fault.set_rate(0.8, 2.0, 3.0)
    fault.set_rate(0.5, 2.0, 3.0, allow_unsafe=True)  # a deliberate unsafe experiment
    real, fake, rate = (float(x) for x in open(tmp_path / "rate").read().split())
    assert rate == 0.5 and abs(fake - real) < 1.0  # continuous: no step at a change
    env = fault.env({"PATH": "/bin"})
    assert env["JM_CLOCK_DIR"] == str(tmp_path) and env["PYTHONPATH"] == str(tmp_path)
    assert "LD_PRELOAD" not in env
    fault.jump(-30)
    assert float(open(tmp_path / "offset").read()) == -30.0


def test_a_libfaketime_fault_steps_through_its_timestamp_file(tmp_path):
    fault = ClockFault(str(tmp_path), libfaketime=True)
    env = fault.env({"PATH": "/bin", "LD_PRELOAD": "other.so"})
    assert env["LD_PRELOAD"].endswith("libfaketime.so.1:other.so")
    assert env["FAKETIME_DONT_FAKE_MONOTONIC"] == "1" and env["FAKETIME_NO_CACHE"] == "1"
    assert env["FAKETIME_TIMESTAMP_FILE"] == fault.spec_file
    fault.jump(30)
    assert open(fault.spec_file).read().strip() == "+30"
    assert float(open(tmp_path / "offset").read()) == 0.0  # not stepped twice


def test_stale_libfaketime_shm_is_removed(tmp_path):
    for name in ("faketime_shm_999999999", "sem.faketime_sem_999999999",
                 f"faketime_shm_{os.getpid()}", "other"):
        (tmp_path / name).write_text("")
    assert sorted(remove_stale_shm(str(tmp_path))) == ["faketime_shm_999999999",
                                                       "sem.faketime_sem_999999999"]
    assert sorted(os.listdir(tmp_path)) == sorted([f"faketime_shm_{os.getpid()}", "other"])


def test_a_faulted_python_process_runs_on_the_fault_clock(tmp_path):
    """The sitecustomize: a step moves only the wall clock; a rate moves both clocks,
    sleeps and selector timeouts, continuously."""
    import subprocess
    import sys
    fault = ClockFault(str(tmp_path))
    fault.jump(30)
    fault.set_rate(1.25, 2.0, 3.0)
    code = ("import time, selectors, json\n"
            "up = lambda: float(open('/proc/uptime').read().split()[0])\n"
            "u0, m0, w0 = up(), time.monotonic(), time.time()\n"
            "time.sleep(0.5); selectors.DefaultSelector().select(0.5)\n"
            "print(json.dumps([up() - u0, time.monotonic() - m0, time.time() - w0]))\n")
    out = subprocess.run([sys.executable, "-c", code], env=fault.env(), capture_output=True,
                         text=True, timeout=60)
    real, mono, wall = json.loads(out.stdout)
    assert mono >= 1.0                                  # slept 1 s on the peer's clock,
    assert mono == pytest.approx(real * 1.25, abs=0.03)  # which runs 1.25x real time
    assert wall == pytest.approx(mono, abs=0.01)        # the wall clock runs as fast
    out = subprocess.run([sys.executable, "-c", "import time; print(time.time())"],
                         env=fault.env(), capture_output=True, text=True, timeout=60)
    assert float(out.stdout) - time.time() == pytest.approx(30.0, abs=2.0)  # the step
