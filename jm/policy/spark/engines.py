"""Engines with share levels (pure): which Spark Connect server a piece of work uses, and
when a peer starts and stops its engines. Apache Kyuubi's engine share levels are the
model (`kyuubi.engine.share.level`: CONNECTION, USER, GROUP, SERVER).

An engine is one Spark Connect server (one JVM) on one peer.

* `peer`: one engine per peer for all work, started with the peer and kept (the default;
  dense, and it shares everything: one job that runs it out of memory stops the work of
  every tenant on that peer).
* `tenant`: one engine per tenant on each peer that has the tenant's work, started when
  the first piece of it arrives and stopped once nothing has used it for
  `spark.connect.engine.idle-timeout`. The tenant's SQL sessions, Livy sessions,
  connect-mode jobs and SQL jobs use it.
* `job`: one engine per connect-mode job (its own JVM, as classic mode has, but warm
  across the job's restarts); a tenant's sessions use the tenant's engine.

`EnginePool` decides, from events, which engines start and stop: a peer holds at most
`spark.connect.engine.max-per-peer` engines; work that needs a new engine while the
peer is full stops the least recently used idle engine first, and waits while every
engine is in use. No clock is read here: `now` comes with each event.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Optional, Union


class ShareLevel(str, Enum):
    PEER = "peer"
    TENANT = "tenant"
    JOB = "job"


DEFAULT_TENANT = "default"  # raft.tenants.DEFAULT (the tenant of work that names none)
MIN_IDLE_TIMEOUT = 10.0  # seconds: a shorter one would stop engines between statements
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(frozen=True, order=True)
class EngineKey:
    """Which engine: the peer's, a tenant's or a job's."""
    level: ShareLevel
    owner: str = ""  # the tenant (TENANT), the job id (JOB), "" (PEER)

    @property
    def name(self) -> str:
        """A name for logs, files and metrics: `peer`, `tenant-<t>`, `job-<id>`."""
        if self.level == ShareLevel.PEER:
            return "peer"
        return f"{self.level.value}-{_UNSAFE.sub('_', self.owner)}"


PEER_ENGINE = EngineKey(ShareLevel.PEER)


def engine_for(level: ShareLevel, tenant: Optional[str],
               job_id: Optional[str] = None) -> EngineKey:
    """The engine a piece of work uses: a job (job_id) or a session (no job_id) of
    `tenant` (None: the default tenant)."""
    if level == ShareLevel.PEER:
        return PEER_ENGINE
    if level == ShareLevel.JOB and job_id:
        return EngineKey(ShareLevel.JOB, job_id)
    return EngineKey(ShareLevel.TENANT, tenant or DEFAULT_TENANT)


# ---- events ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Acquire:
    """`holder` (a job, a SQL session) needs engine `key` until it releases it."""
    key: EngineKey
    holder: str


@dataclass(frozen=True)
class Release:
    key: EngineKey
    holder: str


@dataclass(frozen=True)
class Stopped:
    """Engine `key` was stopped (its JVM is gone): its place on the peer is free."""
    key: EngineKey


@dataclass(frozen=True)
class Tick:
    """Time passed: idle engines past their timeout are stopped."""


Event = Union[Acquire, Release, Stopped, Tick]


# ---- instructions ---------------------------------------------------------------------
@dataclass(frozen=True)
class Start:
    key: EngineKey


@dataclass(frozen=True)
class Stop:
    key: EngineKey
    reason: str


@dataclass(frozen=True)
class Granted:
    """`holder` may use engine `key` (it is started, or starting)."""
    key: EngineKey
    holder: str


Instruction = Union[Start, Stop, Granted]


@dataclass
class _Engine:
    holders: set = field(default_factory=set)
    last_used: float = 0.0
    stopping: bool = False


class EnginePool:
    """The engines of one peer and who holds them (a state machine: `handle(event, now)`
    returns the instructions to perform, in order)."""

    def __init__(self, idle_timeout: float, max_engines: int,
                 pinned: tuple[EngineKey, ...] = ()) -> None:
        self.idle_timeout = idle_timeout
        self.max_engines = max(1, max_engines)
        self.pinned = frozenset(pinned)  # started at once, never stopped for idleness
        self.engines: dict[EngineKey, _Engine] = {}
        self.waiting: list[Acquire] = []  # in arrival order

    def boot(self, now: float) -> list[Instruction]:
        """The pinned engines, started with the peer."""
        out: list[Instruction] = []
        for key in sorted(self.pinned):
            self.engines[key] = _Engine(last_used=now)
            out.append(Start(key))
        return out

    def handle(self, event: Event, now: float) -> list[Instruction]:
        if isinstance(event, Acquire):
            return self._acquire(event, now)
        if isinstance(event, Release):
            e = self.engines.get(event.key)
            self.waiting = [w for w in self.waiting if w != Acquire(event.key, event.holder)]
            if e is not None and event.holder in e.holders:
                e.holders.discard(event.holder)
                e.last_used = now
            return self._admit(now)
        if isinstance(event, Stopped):
            e = self.engines.get(event.key)
            if e is not None and e.stopping:
                del self.engines[event.key]
            return self._admit(now)
        if isinstance(event, Tick):
            out: list[Instruction] = []
            for key, e in sorted(self.engines.items()):
                if (not e.holders and not e.stopping and key not in self.pinned
                        and now - e.last_used >= self.idle_timeout):
                    e.stopping = True
                    out.append(Stop(key, f"idle for {now - e.last_used:.0f} s"))
            return out
        raise TypeError(f"not an engine event: {event!r}")

    def _acquire(self, ev: Acquire, now: float) -> list[Instruction]:
        e = self.engines.get(ev.key)
        if e is not None and not e.stopping:
            e.holders.add(ev.holder)
            e.last_used = now
            return [Granted(ev.key, ev.holder)]
        if ev not in self.waiting:
            self.waiting.append(ev)
        return self._admit(now)

    def _admit(self, now: float) -> list[Instruction]:
        """Waiting work, in order, onto engines that run or can start."""
        out: list[Instruction] = []
        still: list[Acquire] = []
        for ev in self.waiting:
            e = self.engines.get(ev.key)
            if e is not None and not e.stopping:
                e.holders.add(ev.holder)
                e.last_used = now
                out.append(Granted(ev.key, ev.holder))
                continue
            if e is None and len(self.engines) < self.max_engines:
                self.engines[ev.key] = _Engine({ev.holder}, now)
                out += [Start(ev.key), Granted(ev.key, ev.holder)]
                continue
            if e is None and not any(x.stopping for x in self.engines.values()):
                victim = self._least_recently_used_idle()
                if victim is not None:
                    self.engines[victim].stopping = True
                    out.append(Stop(victim, f"the peer holds spark.connect.engine.max-per-peer "
                                            f"({self.max_engines}) engines; "
                                            f"{ev.key.name} needs the place"))
            still.append(ev)
        self.waiting = still
        return out

    def _least_recently_used_idle(self) -> Optional[EngineKey]:
        idle = [(e.last_used, k) for k, e in self.engines.items()
                if not e.holders and not e.stopping and k not in self.pinned]
        return min(idle)[1] if idle else None

    def holders(self, key: EngineKey) -> frozenset:
        e = self.engines.get(key)
        return frozenset(e.holders) if e is not None else frozenset()

    def waiting_for(self, key: EngineKey) -> int:
        return sum(1 for w in self.waiting if w.key == key)
