"""Clock faults for one peer: its wall clock stepped by ±N s while it runs (an NTP step),
and its clocks running fast or slow (a bad oscillator moves the wall *and* the monotonic
clock). Used by tests/e2e/test_clock.py; also a job module (`clock:probe`,
`clock:always_fails`) when the chaos folder is a job's pyfiles entry, so this module
imports the standard library only.

How a peer is faulted: `ClockFault.env()` is the environment to start it with; its zygote
and job processes inherit it. Every Python process of the peer then loads the
`sitecustomize.py` written into the fault's directory (PYTHONPATH), which runs
`time.monotonic`/`perf_counter`/`clock_gettime(CLOCK_MONOTONIC*, CLOCK_BOOTTIME)` on one
piecewise-linear schedule of the real CLOCK_MONOTONIC (`<dir>/rate`: `real fake rate`, the
same for every process of the peer, so the peer and its zygote agree on lease ends),
`time.time` at the same rate plus the step (`<dir>/offset`), and scales `time.sleep` and
the selectors' timeouts by the rate. Both files are re-read at most every 0.1 s, so
`jump()` and `set_rate()` act on a running peer. A step moves only the wall clock, as an
NTP step does; a rate moves both clocks, as an oscillator does.

**libfaketime** (`ClockFault(libfaketime=True)`: Debian's libfaketime.so.1 in LD_PRELOAD,
the step in FAKETIME_TIMESTAMP_FILE, FAKETIME_NO_CACHE=1, FAKETIME_DONT_FAKE_MONOTONIC=1)
also reaches non-Python children, but is not what the test uses, because with CPython 3.11
and libfaketime 0.9.10 (measured on Debian 12):
* a faked CLOCK_MONOTONIC (its default, and the only way to give it a rate) makes every
  `Lock.acquire(timeout=...)` hang: sem_clockwait is not intercepted and its deadline
  then lies decades ahead; the timed waits it does intercept come out seconds wrong at x2;
* with FAKETIME_DONT_FAKE_MONOTONIC=1, `time.sleep` (clock_nanosleep on an absolute
  CLOCK_MONOTONIC deadline) fails with EINVAL (the sitecustomize replaces it);
* every time call reads the timestamp file and takes a semaphore shared by the process
  tree (FAKETIME_SHARED): a `time.time()` took up to 200 ms with 4 threads on a loaded
  2-core machine, and three peers merely started under it at offset +0 lost their leases
  a dozen times a minute (none without it): the fault would be libfaketime's latency,
  not the clock. It also leaves /dev/shm/faketime_* behind killed processes
  (`remove_stale_shm`).

Which rates are safe is arithmetic, not luck: see `lease_safe`. `ClockFault.set_rate`
refuses a rate outside `safe_rate_range` unless told to allow it.

The probe (`probe`) stamps its lines with /proc/uptime, the kernel's boot clock: no clock
fault moves it, so the lines of attempts on a faulted peer and on healthy ones can be
compared (chaos.checks.check_single_attempt)."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Optional

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
FENCE_LATENCY = 0.1  # s: from a lease's end to its job processes' death (watchdog step)

# Installed in every Python process of a faulted peer (PYTHONPATH). Standard library only,
# and quick: it runs at every interpreter start.
# the peer's children get only an allow-list of its environment (jm/policy/jobs/jobenv.py): the
# clock's variables are named for them (LD_PRELOAD and PYTHONPATH pass by default)
CHILDREN_SEE = {"JM_CONF_JOBMANAGER_EXECUTOR_ENV_PASS": "JM_CLOCK_DIR,FAKETIME_*"}

SITECUSTOMIZE = r'''"""Written by chaos/clock.py: this peer's clocks follow $JM_CLOCK_DIR/rate (both
clocks, a bad oscillator) and $JM_CLOCK_DIR/offset (a wall clock step)."""
import os as _os
import time as _time


def _install(directory):
    import _thread
    import selectors

    real_mono, real_wall, real_cg_ns = _time.monotonic, _time.time, _time.clock_gettime_ns
    monos = {getattr(_time, n) for n in ("CLOCK_MONOTONIC", "CLOCK_MONOTONIC_RAW",
                                         "CLOCK_BOOTTIME", "CLOCK_MONOTONIC_COARSE")
             if hasattr(_time, n)}
    st = {"read": -1.0, "seg": (0.0, 0.0, 1.0), "offset": 0.0, "last": 0.0}

    def refresh(now):
        if now - st["read"] > 0.1:  # re-read at most 10 times a second
            st["read"] = now
            try:
                with open(_os.path.join(directory, "rate")) as f:
                    real, fake, rate = (float(x) for x in f.read().split())
                st["seg"] = (real, fake, rate)
            except (OSError, ValueError):
                pass
            try:
                with open(_os.path.join(directory, "offset")) as f:
                    st["offset"] = float(f.read())
            except (OSError, ValueError):
                pass

    def fake_mono(now):
        refresh(now)
        real, fake, rate = st["seg"]
        value = fake + (now - real) * rate if now >= real else now
        st["last"] = value = max(value, st["last"])  # a late re-read never goes back
        return value

    def mono():
        return fake_mono(real_mono())

    def rate():
        refresh(real_mono())
        return st["seg"][2]

    def wall():
        now = real_mono()
        return real_wall() + (fake_mono(now) - now) + st["offset"]

    def clock_gettime(clk):
        if clk in monos:
            return mono()
        return wall() if clk == _time.CLOCK_REALTIME else real_cg_ns(clk) / 1e9

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
            return _orig(self, timeout if timeout is None or timeout <= 0
                         else timeout / rate())
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
    """One peer's clocks: a wall clock step (`offset`) and a rate of both clocks, changed
    while the peer runs through files in `directory`."""
    directory: str
    libfaketime: bool = False  # steps through libfaketime (see the module's docstring)
    offset: float = 0.0
    rate: float = 1.0
    _fake: float = field(default=0.0, repr=False)   # fake monotonic at the last change
    _real: float = field(default=0.0, repr=False)   # real monotonic at the last change

    def __post_init__(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        with open(os.path.join(self.directory, "sitecustomize.py"), "w") as f:
            f.write(SITECUSTOMIZE)
        self._real = self._fake = time.monotonic()
        self._write_offset()
        self._write_rate()

    @property
    def spec_file(self) -> str:
        """libfaketime's FAKETIME_TIMESTAMP_FILE."""
        return os.path.join(self.directory, "faketime.rc")

    def env(self, base: Optional[dict] = None) -> dict:
        """The environment to start the peer with (its children inherit it)."""
        env = dict(os.environ if base is None else base)
        env["JM_CLOCK_DIR"] = self.directory
        env.update(CHILDREN_SEE)  # the zygote, the jobs and Spark follow the clock too
        env["PYTHONPATH"] = os.pathsep.join(p for p in (self.directory, env.get("PYTHONPATH"))
                                            if p)
        if self.libfaketime:
            preload = env.get("LD_PRELOAD")
            env.update({"LD_PRELOAD": LIBFAKETIME + (":" + preload if preload else ""),
                        "FAKETIME_TIMESTAMP_FILE": self.spec_file,
                        "FAKETIME_NO_CACHE": "1",
                        "FAKETIME_DONT_FAKE_MONOTONIC": "1"})  # a step leaves it alone
        return env

    def jump(self, offset: float) -> None:
        """Step the wall clock to `offset` seconds from where the rate put it (as NTP
        would); the monotonic clock does not move."""
        self.offset = offset
        self._write_offset()

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

    def _write_offset(self) -> None:
        if self.libfaketime:  # libfaketime steps the wall clock; the Python layer does not
            _replace(self.spec_file, f"{self.offset:+g}\n")
            _replace(os.path.join(self.directory, "offset"), "0\n")
        else:
            _replace(os.path.join(self.directory, "offset"), f"{self.offset!r}\n")

    def _write_rate(self) -> None:
        _replace(os.path.join(self.directory, "rate"),
                 f"{self._real!r} {self._fake!r} {self.rate!r}\n")


def remove_stale_shm(shm_dir: str = "/dev/shm") -> list[str]:
    """libfaketime's shared memory and semaphores of processes that are gone (a SIGKILLed
    process cannot remove them, and a later process with the same pid under libfaketime
    would fail to start): removed, as libfaketime's README advises."""
    gone = []
    for name in os.listdir(shm_dir) if os.path.isdir(shm_dir) else []:
        if not name.startswith(("faketime_shm_", "sem.faketime_sem_")):
            continue
        pid = name.rsplit("_", 1)[-1]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            try:
                os.unlink(os.path.join(shm_dir, name))
                gone.append(name)
            except OSError:
                pass
    return gone


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
