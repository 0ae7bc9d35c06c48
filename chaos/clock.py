"""Clock faults for one peer: its wall clock stepped by ±N s while it runs (an NTP step),
and its clocks running fast or slow (a bad oscillator moves the wall *and* the monotonic
clock). Used by tests/e2e/test_clock.py; also a job module (`clock:probe`,
`clock:always_fails`) when the chaos folder is a job's pyfiles entry, so this module
imports the standard library only.

How a peer is faulted (`ClockFault.env()` is the environment of its start; the zygote and
the job processes inherit it):

* **Wall clock steps: libfaketime** (Debian's `libfaketime.so.1`, LD_PRELOAD). The offset
  comes from `FAKETIME_TIMESTAMP_FILE` (`+30`, `-30`, `+0`), re-read at every call
  (`FAKETIME_NO_CACHE=1`), so `jump()` steps the clock of every process of the peer while
  it runs. `FAKETIME_DONT_FAKE_MONOTONIC=1`: a real host's wall clock step does not move
  CLOCK_MONOTONIC, and neither does this one.
* **Fast or slow clocks: a rate on both clocks**, in every Python process of the peer
  (`sitecustomize.py` on PYTHONPATH, written next to the timestamp file):
  `time.monotonic`, `time.clock_gettime(CLOCK_MONOTONIC*/BOOTTIME)`, `time.time`, the
  selectors' timeouts and `time.sleep` follow one piecewise-linear schedule of the real
  CLOCK_MONOTONIC (`<dir>/rate`: `real fake rate`), the same for all processes of the
  peer (the peer and its zygote compare lease ends on it). libfaketime's own rate (`x2`)
  is not used for this: with CPython 3.11 and Debian's libfaketime 0.9.10, a faked
  CLOCK_MONOTONIC makes every `Lock.acquire(timeout=...)` hang (sem_clockwait is not
  intercepted, and its deadline then lies decades ahead) and the timed waits it does
  translate come out wrong by seconds at `x2`.
* **A libfaketime bug worked around**: with `FAKETIME_DONT_FAKE_MONOTONIC=1`, CPython's
  `time.sleep` (clock_nanosleep on an absolute CLOCK_MONOTONIC deadline) fails with
  EINVAL; the same sitecustomize replaces it by a timed lock wait.

Which rates are safe is arithmetic, not luck (`lease_safe`, `safe_rate_range`): see the
docstring of `lease_safe`. `ClockFault.set_rate` refuses a rate outside the safe range
unless told to allow it.

The probe (`probe`) stamps its lines with /proc/uptime, the kernel's boot clock: no
clock fault of ours moves it, so the lines of attempts on a faulted peer and on healthy
ones can be compared (chaos.checks.check_single_attempt)."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Optional

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
FENCE_LATENCY = 0.1  # s: from a lease's end to its job processes' death (watchdog step)

# Installed in every Python process of a faulted peer (PYTHONPATH). Standard library only,
# and quick: it runs at every interpreter start.
SITECUSTOMIZE = r'''"""Written by chaos/clock.py: this peer's clocks run at the rate in $JM_CLOCK_DIR/rate
(both the wall and the monotonic clock, as on a host with a bad oscillator), and
time.sleep works under libfaketime with FAKETIME_DONT_FAKE_MONOTONIC=1."""
import os as _os
import time as _time


def _install(directory):
    import _thread
    import selectors

    real_mono, real_wall = _time.monotonic, _time.time
    real_cg, real_cg_ns = _time.clock_gettime, _time.clock_gettime_ns
    monos = {getattr(_time, n) for n in ("CLOCK_MONOTONIC", "CLOCK_MONOTONIC_RAW",
                                         "CLOCK_BOOTTIME", "CLOCK_MONOTONIC_COARSE")
             if hasattr(_time, n)}
    path = _os.path.join(directory, "rate")
    state = {"read": -1.0, "seg": (0.0, 0.0, 1.0), "last": 0.0}

    def segment():
        now = real_mono()
        if now - state["read"] > 0.1:  # the schedule is re-read at most 10 times a second
            state["read"] = now
            try:
                with open(path) as f:
                    real, fake, rate = (float(x) for x in f.read().split())
                state["seg"] = (real, fake, rate)
            except (OSError, ValueError):
                pass
        return now, state["seg"]

    def mono():
        now, (real, fake, rate) = segment()
        value = fake + (now - real) * rate if now >= real else now
        state["last"] = value = max(value, state["last"])  # a late re-read never goes back
        return value

    def rate():
        return segment()[1][2]

    def wall():
        now = real_mono()
        return real_wall() + (mono() - now)

    def clock_gettime(clk):
        return mono() if clk in monos else (wall() if clk == _time.CLOCK_REALTIME
                                            else real_cg(clk))

    def clock_gettime_ns(clk):
        if clk in monos or clk == _time.CLOCK_REALTIME:
            return int(clock_gettime(clk) * 1e9)
        return real_cg_ns(clk)

    def sleep(secs):
        if secs < 0:
            raise ValueError("sleep length must be non-negative")
        lock = _thread.allocate_lock()
        lock.acquire()
        lock.acquire(timeout=secs / rate())  # a lock wait: no clock_nanosleep

    for cls in {selectors.DefaultSelector, selectors.SelectSelector,
                getattr(selectors, "EpollSelector", selectors.SelectSelector),
                getattr(selectors, "PollSelector", selectors.SelectSelector)}:
        def select(self, timeout=None, _orig=cls.select):
            return _orig(self, timeout if timeout is None or timeout <= 0 else timeout / rate())
        cls.select = select
    _time.monotonic, _time.perf_counter = mono, mono
    _time.monotonic_ns = lambda: int(mono() * 1e9)
    _time.time, _time.time_ns = wall, (lambda: int(wall() * 1e9))
    _time.clock_gettime, _time.clock_gettime_ns = clock_gettime, clock_gettime_ns
    _time.sleep = sleep


if _os.environ.get("JM_CLOCK_DIR"):
    _install(_os.environ["JM_CLOCK_DIR"])
'''


def lease_safe(peer_rate: float, leader_rate: float, lease: float, heartbeat_timeout: float,
               fence_latency: float = FENCE_LATENCY) -> bool:
    """Fencing is safe for a peer whose clocks run at `peer_rate` (its seconds per real
    second) under a leader whose clocks run at `leader_rate`.

    The peer sends a heartbeat at real time s; its lease (and its zygote's copy) runs out
    when its monotonic clock has advanced `lease`, at real s + lease / peer_rate, and its
    job processes are dead `fence_latency` later. The leader applies the heartbeat at
    a >= s and declares the peer dead when its own monotonic clock has advanced
    `heartbeat.timeout` without another one: at real a + timeout / leader_rate, the
    earliest moment another attempt can start. No two attempts run at once iff

        lease / peer_rate + fence_latency < timeout / leader_rate.

    With the defaults (lease 2 s, timeout 3 s) and a 0.1 s fencing latency this is
    peer_rate / leader_rate > 2 / 2.9 = 0.69: a peer whose clock runs 0.5x is unsafe (its
    lease lasts 4 s of real time, the leader moves its jobs after 3 s), and so is a
    leader whose clock runs 1.5x or faster over healthy peers."""
    return lease / peer_rate + fence_latency < heartbeat_timeout / leader_rate


def safe_rate_range(lease: float, heartbeat_timeout: float,
                    fence_latency: float = FENCE_LATENCY) -> tuple[float, float]:
    """The open range of rates one peer's clocks may run at, the others' being right,
    whether that peer is a follower (its rate slows its fencing) or the leader (its rate
    hastens its failure detection): lease_safe holds both ways inside it."""
    low = lease / (heartbeat_timeout - fence_latency)
    high = heartbeat_timeout / (lease + fence_latency)
    return low, high


@dataclass
class ClockFault:
    """One peer's clocks: offset (wall clock step) and rate (both clocks), changed while
    the peer runs through files in `directory`."""
    directory: str
    offset: float = 0.0
    rate: float = 1.0
    _fake: float = field(default=0.0, repr=False)   # fake monotonic at the last change
    _real: float = field(default=0.0, repr=False)   # real monotonic at the last change

    def __post_init__(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        with open(os.path.join(self.directory, "sitecustomize.py"), "w") as f:
            f.write(SITECUSTOMIZE)
        self._real = self._fake = time.monotonic()
        self._write_spec()
        self._write_rate()

    @property
    def spec_file(self) -> str:
        return os.path.join(self.directory, "faketime.rc")

    def env(self, base: Optional[dict] = None) -> dict:
        """The environment to start the peer with (its children inherit it)."""
        env = dict(os.environ if base is None else base)
        preload = env.get("LD_PRELOAD")
        env.update({
            "LD_PRELOAD": LIBFAKETIME + (":" + preload if preload else ""),
            "FAKETIME_TIMESTAMP_FILE": self.spec_file,
            "FAKETIME_NO_CACHE": "1",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",  # a wall clock step leaves it alone
            "JM_CLOCK_DIR": self.directory,
            "PYTHONPATH": os.pathsep.join(p for p in (self.directory, env.get("PYTHONPATH"))
                                          if p),
        })
        return env

    def jump(self, offset: float) -> None:
        """Step the wall clock to `offset` seconds from the true time (as NTP would)."""
        self.offset = offset
        self._write_spec()

    def set_rate(self, rate: float, lease: float, heartbeat_timeout: float,
                 allow_unsafe: bool = False) -> None:
        """Run both clocks at `rate` from now on (continuously: no step). Refuses a rate
        at which fencing is not safe (safe_rate_range) unless `allow_unsafe`."""
        low, high = safe_rate_range(lease, heartbeat_timeout)
        if not allow_unsafe and not low < rate < high:
            raise ValueError(f"clock rate {rate:g} is outside the safe range "
                             f"({low:.3f}, {high:.3f}) for lease {lease:g} s and "
                             f"heartbeat.timeout {heartbeat_timeout:g} s")
        now = time.monotonic()
        self._fake += (now - self._real) * self.rate
        self._real, self.rate = now, rate
        self._write_rate()

    def _write_spec(self) -> None:
        _replace(self.spec_file, f"{self.offset:+g}\n")

    def _write_rate(self) -> None:
        _replace(os.path.join(self.directory, "rate"),
                 f"{self._real!r} {self._fake!r} {self.rate!r}\n")


def _replace(path: str, text: str) -> None:
    """Atomic rewrite: a reader sees the old or the new content, never a part."""
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


# ---- jobs (entry points when the chaos folder is on a job's pyfiles) -------------------

def uptime() -> float:
    """The kernel's boot clock, read from /proc: no clock fault of ours moves it."""
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])


def probe(ctx) -> str:
    """Appends `job attempt node uptime` to <dir>/<job>.log every `period` until asked to
    stop (as chaos/probe.py, stamped with the unfaked boot clock)."""
    directory = ctx.args["dir"]
    period = float(ctx.args.get("period", 0.1))
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"{ctx.job_id}.log"), "a", buffering=1) as f:
        while not ctx.stop_requested.is_set():
            f.write(f"{ctx.job_id} {ctx.attempt} {ctx.node} {uptime():.3f}\n")
            ctx.stop_requested.wait(period)
    return "stopped"


def always_fails(ctx) -> None:
    """Records the start of each run (`attempt node uptime`) in <dir>/<job>.runs, then
    fails: the restart strategy's delays show as the gaps between runs."""
    directory = ctx.args["dir"]
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, f"{ctx.job_id}.runs"), "a") as f:
        f.write(f"{ctx.attempt} {ctx.node} {uptime():.3f}\n")
    raise RuntimeError("always fails")


def read_probes(directory: str, suffix: str = ".log") -> dict[str, list[tuple[int, str, float]]]:
    """{job: [(attempt, node, t), ...]} from the probe files (chaos.checks' input)."""
    out: dict[str, list[tuple[int, str, float]]] = {}
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        if not name.endswith(suffix):
            continue
        rows = []
        with open(os.path.join(directory, name)) as f:
            for line in f:
                parts = line.split()
                if suffix == ".log" and len(parts) == 4:
                    rows.append((int(parts[1]), parts[2], float(parts[3])))
                elif suffix == ".runs" and len(parts) == 3:
                    rows.append((int(parts[0]), parts[1], float(parts[2])))
        out[name[:-len(suffix)]] = rows
    return out
