"""What the zygote decides, purely: `ZygoteState.handle(event, now) -> [action]`.

Events are the peer's messages (jm/runtime/zygoteproto.py: `Spawn`, `Lease`, `Guard`, or
`Garbled` for a frame that is none) and what the zygote's loop saw of the OS (a job
process forked, stopped itself, ended; a look at the lease; the peer's state; stdin
closed). Actions are what the loop does (fork, send a message, kill or continue a
process, remove a job's cgroup, exit). No os, no signals, no clock: `now` is
CLOCK_MONOTONIC seconds, passed in. jm/runtime/zygote.py is the driver.

The rules kept here:
* nothing runs without a lease: past its end every job process is killed (its whole
  group) with the guarded processes, and a spawn is refused (an `Exited` marked fenced,
  pid 0) instead of forked;
* before judging the lease run out, the newest `Lease` the peer already sent counts (the
  loop reads its input first: a zygote that was stopped must not fence a peer that kept
  renewing);
* a job process that stopped itself (its fence was stopped) is continued once the lease
  holds and the peer runs;
* each job process's exit is reported once, with whether the lease killed it; what it
  left in its process group is killed before it is reaped;
* a frame the zygote cannot take gets an `Error` answer; the zygote carries on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from jm.policy.jobs.runparams import RunParams
from jm.runtime.zygoteproto import TO_PEER, Error, Exited, Guard, Lease, Spawn, Spawned

IDLE_WAIT = 1.0  # seconds: the longest the loop sleeps when nothing is due
PAUSED_POLL = 0.1  # seconds between looks at the peer while jobs wait for it to run
SIGKILL = 9  # signal.SIGKILL (Linux); this module sends no signal


@dataclass(frozen=True)
class _Pid:
    """An event or action about one process (each subclass is its own type: KillJob(1) is
    not KillPid(1))."""
    pid: int


# ---- events (besides the peer's messages) ------------------------------------------------
@dataclass(frozen=True)
class Garbled:
    """A frame from the peer that is no message (zygoteproto.ProtocolError)."""
    reason: str


@dataclass(frozen=True)
class Forked:
    """The job process of `key` was forked (answer to `Fork`)."""
    key: str
    pid: int


class ChildEnding(_Pid):
    """A child ended and is not reaped yet (its pid and group id cannot be reused)."""


@dataclass(frozen=True)
class ChildReaped:
    """A child was reaped: its exit code, or -signal and the signal."""
    pid: int
    code: int
    signal: int


class ChildStopped(_Pid):
    """A job process stopped itself (its fence was stopped)."""


@dataclass(frozen=True)
class Tick:
    """A look at the lease; `pending`: the newest Lease among the frames read, not yet
    handled (None: none, or the loop did not read because the lease holds)."""
    pending: Optional[float] = None


@dataclass(frozen=True)
class PeerSeen:
    """Whether the peer process runs (not stopped), for the job processes that wait."""
    runs: bool


@dataclass(frozen=True)
class InputClosed:
    """EOF on stdin: the peer is gone or stops the zygote."""


Event = Union[Spawn, Lease, Guard, Garbled, Forked, ChildEnding, ChildReaped, ChildStopped,
              Tick, PeerSeen, InputClosed]


# ---- actions -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Send:
    msg: object


@dataclass(frozen=True)
class Fork:
    """Fork the job process; the loop answers with `Forked`."""
    key: str
    params: RunParams


class KillJob(_Pid):
    """SIGKILL a job process's group (the process alone if it has none yet)."""


class KillLeftovers(_Pid):
    """SIGKILL what is left in an ended job process's group (not the zygote's group)."""


class KillPid(_Pid):
    """SIGKILL one process (a guarded one)."""


class Continue(_Pid):
    """SIGCONT a stopped job process's group (the process alone if it has none)."""


class DropCgroup(_Pid):
    """Remove the cgroup of an ended job process."""


@dataclass(frozen=True)
class Exit:
    """Kill the groups of the job processes still known, clean up, end the loop."""
    pids: tuple


Action = Union[Send, Fork, KillJob, KillLeftovers, KillPid, Continue, DropCgroup, Exit]


def wait_timeout(now: float, lease_until: float, idle: float = IDLE_WAIT) -> float:
    """How long the main loop may block in select (pure; `now` is CLOCK_MONOTONIC).

    Until the lease runs out: until just past its end (at most `idle`), so that the
    job processes are killed on time. Once it has run out, the kill is done (every later
    spawn is refused at once) and only the peer (stdin) or a child (SIGCHLD) can change
    anything: wait `idle`, never 0, so a fenced zygote sleeps instead of spinning."""
    left = lease_until - now
    if left < 0 or left == float("inf"):
        return idle
    return min(idle, left + 0.001)


def refused(key: str) -> Exited:
    """The answer to a spawn while the lease has run out: nothing was run."""
    return Exited(key, 0, -SIGKILL, SIGKILL, True)


class ZygoteState:
    """The zygote's job processes and lease. `handle` is the only way in."""

    def __init__(self) -> None:
        self.children: dict[int, str] = {}  # pid -> key
        self.fenced: set[int] = set()       # killed because the lease ran out
        self.paused: set[int] = set()       # stopped themselves (their fence was stopped)
        self.lease_until = float("inf")     # no lease until the peer sends one
        self.guarded: list[int] = []
        self.closed = False

    def lease_ran_out(self, now: float) -> bool:
        return now > self.lease_until

    def timeout(self, now: float) -> float:
        """How long the loop may wait for input or a child (jobs waiting: look often)."""
        t = wait_timeout(now, self.lease_until)
        return min(t, PAUSED_POLL) if self.paused else t

    def handle(self, event, now: float) -> list:
        fn = self._HANDLERS.get(type(event))
        if fn is None:
            what = "a message to the peer" if isinstance(event, TO_PEER) else "unknown"
            return [Send(Error(f"{type(event).__name__}: {what}, not for the zygote"))]
        return fn(self, event, now)

    # ---- the peer's messages -------------------------------------------------------------
    def _lease(self, ev: Lease, now: float) -> list:
        self.lease_until = ev.until
        return []

    def _guard(self, ev: Guard, now: float) -> list:
        self.guarded = [int(p) for p in ev.pids]
        return []

    def _spawn(self, ev: Spawn, now: float) -> list:
        if self.lease_ran_out(now):  # fenced: run nothing
            return [Send(refused(ev.key))]
        return [Fork(ev.key, ev.params)]

    def _garbled(self, ev: Garbled, now: float) -> list:
        return [Send(Error(ev.reason))]

    # ---- the OS --------------------------------------------------------------------------
    def _forked(self, ev: Forked, now: float) -> list:
        self.children[ev.pid] = ev.key
        return [Send(Spawned(ev.key, ev.pid))]

    def _ending(self, ev: ChildEnding, now: float) -> list:
        # what the attempt left in its group (its Spark driver JVM...), while the zombie
        # still holds the group id so that no reused id is hit
        return [KillLeftovers(ev.pid)] if ev.pid in self.children else []

    def _reaped(self, ev: ChildReaped, now: float) -> list:
        key = self.children.pop(ev.pid, None)
        if key is None:
            return []
        self.paused.discard(ev.pid)
        was_fenced = ev.pid in self.fenced
        self.fenced.discard(ev.pid)
        return [DropCgroup(ev.pid), Send(Exited(key, ev.pid, ev.code, ev.signal, was_fenced))]

    def _stopped(self, ev: ChildStopped, now: float) -> list:
        if ev.pid in self.children:
            self.paused.add(ev.pid)
        return []

    def _tick(self, ev: Tick, now: float) -> list:
        if not self.lease_ran_out(now):
            return []
        if ev.pending is not None:  # the peer renewed it while we did not look
            self.lease_until = ev.pending
            if not self.lease_ran_out(now):
                return []
        actions: list = [KillPid(pid) for pid in reversed(self.guarded)]
        self.guarded = []
        for pid in self.children:
            if pid not in self.fenced:
                self.fenced.add(pid)
                actions.append(KillJob(pid))
        return actions

    def _peer_seen(self, ev: PeerSeen, now: float) -> list:
        """Continue the stopped job processes once their fence runs again: the lease
        still holds (else they are killed) and the peer is not stopped."""
        if not self.paused or self.lease_ran_out(now) or not ev.runs:
            return []
        actions = [Continue(pid) for pid in self.paused]
        self.paused.clear()
        return actions

    def _closed(self, ev: InputClosed, now: float) -> list:
        self.closed = True
        return [Exit(tuple(self.children))]

    _HANDLERS = {Lease: _lease, Guard: _guard, Spawn: _spawn, Garbled: _garbled,
                 Forked: _forked, ChildEnding: _ending, ChildReaped: _reaped,
                 ChildStopped: _stopped, Tick: _tick, PeerSeen: _peer_seen,
                 InputClosed: _closed}
