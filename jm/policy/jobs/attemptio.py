"""The vocabulary of jm/policy/jobs/attempt.py: the events a JobMaster's driver feeds its
AttemptState (what happened) and the instructions it gets back (what to do). Frozen
dataclasses; `restart` tags let the state drop an event about an earlier process."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

from jm.policy.jobs.intents import Intents


# ---- events ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Begin:
    """The JobMaster of this epoch starts."""


@dataclass(frozen=True)
class IntentsChanged:
    intents: Intents


@dataclass(frozen=True)
class Spawned:
    """The job process of restart `restart` runs (refused: the zygote ran nothing, this
    peer holds no lease; its exit follows)."""
    restart: int
    refused: bool = False


@dataclass(frozen=True)
class SpawnFailed:
    """The attempt could not start (its code, its savepoint, the executor); final: no
    restart can help (a savepoint that cannot be restored)."""
    restart: int
    failure: dict
    final: bool = False


@dataclass(frozen=True)
class Exited:
    restart: int
    code: int
    signal: int = 0
    lease_expired: bool = False   # stopped because this peer's lease ran out


@dataclass(frozen=True)
class Reported:
    """A report's outcome in the replicated state (code "stale": another epoch owns it)."""
    status: str
    restart: int
    ok: bool
    code: Optional[str] = None
    error: Optional[str] = None


@dataclass(frozen=True)
class StopTimedOut:
    restart: int


@dataclass(frozen=True)
class SessionCleaned:
    restart: int


@dataclass(frozen=True)
class ResultRead:
    restart: int
    result: Any = None
    problem: Optional[str] = None   # why the result cannot be used (too large, not a file)


@dataclass(frozen=True)
class FailureRead:
    restart: int
    failure: dict


@dataclass(frozen=True)
class SavepointTaken:
    location: Optional[str]
    failure: Optional[str]


@dataclass(frozen=True)
class Committed:
    ok: bool
    code: Optional[str] = None
    error: Optional[str] = None


@dataclass(frozen=True)
class DelayElapsed:
    restart: int


@dataclass(frozen=True)
class LeaseBack:
    pass


Event = Union[Begin, IntentsChanged, Spawned, SpawnFailed, Exited, Reported, StopTimedOut,
              SessionCleaned, ResultRead, FailureRead, SavepointTaken, Committed,
              DelayElapsed, LeaseBack]


# ---- instructions ------------------------------------------------------------------------
@dataclass(frozen=True)
class Report:
    """Send a status report; its outcome comes back as Reported (reports are committed in
    the order they are sent)."""
    status: str
    restart: int
    result: Any = None
    failure: Optional[dict] = None


@dataclass(frozen=True)
class Spawn:
    restart: int


@dataclass(frozen=True)
class Kill:
    restart: int
    graceful: bool   # SIGTERM (the job may stop itself) or SIGKILL


@dataclass(frozen=True)
class ArmStopTimer:
    """StopTimedOut after the cancel timeout, unless the process exits first."""
    restart: int


@dataclass(frozen=True)
class CleanupSession:
    """Stop the streaming queries a killed attempt left in the Spark Connect server."""
    restart: int


@dataclass(frozen=True)
class ReadResult:
    restart: int


@dataclass(frozen=True)
class ReadFailure:
    restart: int
    code: int
    signal: int


@dataclass(frozen=True)
class TakeSavepoint:
    trigger_id: str
    target: Optional[str]


@dataclass(frozen=True)
class Release:
    """Commit the job's release to the peer it moves to."""


@dataclass(frozen=True)
class CompleteStop:
    """Commit the stop-with-savepoint's outcome (and the job's last result)."""
    trigger_id: str
    location: Optional[str]
    failure: Optional[str]
    result: Any = None


@dataclass(frozen=True)
class WaitFor:
    """DelayElapsed after `seconds` (a cancel, stop or move may come first)."""
    restart: int
    seconds: float


@dataclass(frozen=True)
class WaitForLease:
    """LeaseBack once this peer holds its lease again."""


@dataclass(frozen=True)
class Done:
    reason: str
    fenced: bool = False


Instruction = Union[Report, Spawn, Kill, ArmStopTimer, CleanupSession, ReadResult,
                    ReadFailure, TakeSavepoint, Release, CompleteStop, WaitFor,
                    WaitForLease, Done]
