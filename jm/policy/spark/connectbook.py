"""The Connect sessions a peer's endpoint serves (pure): who may use a session, when one
is opened (recorded in Raft, where the tenant's session quota is kept), and when an idle
one is closed. The driver is jm/cluster/spark/connectfront.py; it passes events in with
the time and performs what comes back.

A session is opened by the first request that names it (Spark Connect has no "open"):
`Open` is to be committed (OpenConnectSession) and the engine acquired; the requests
that arrive meanwhile wait for `Opened`. It belongs to the credential that opened it: the
same session id from another credential is refused (a tenant cannot reach another's
session by guessing its id). It is closed when its client releases it, or when no request
of it has run for the idle timeout (`Tick`): `Close` says whether Spark still holds it.
A closed session's id is remembered for a while, so its client hears why it is gone
instead of opening a fresh, empty session under the old id.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Optional, Union

from jm.api import RANK, SUBMIT, Credential

NEEDED = SUBMIT            # a Connect session runs work: the role that submits jobs
REMEMBER_CLOSED = 10_000   # closed session ids remembered (the oldest forgotten first)


class Code(str, Enum):
    """gRPC status codes of the endpoint's refusals."""
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    UNAVAILABLE = "UNAVAILABLE"
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"


class Phase(str, Enum):
    OPENING = "opening"
    OPEN = "open"


# ---- events -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Call:
    """A request of session `session_id` from `who` begins."""
    session_id: str
    who: Credential
    user_id: str = ""


@dataclass(frozen=True)
class CallDone:
    session_id: str


@dataclass(frozen=True)
class Opened:
    """The opening's outcome: committed and the engine had (`refusal` None), or not."""
    session_id: str
    refusal: Optional["Refuse"] = None


@dataclass(frozen=True)
class Released:
    """The client released the session (ReleaseSession answered by Spark)."""
    session_id: str


@dataclass(frozen=True)
class Tick:
    idle_timeout: float


Event = Union[Call, CallDone, Opened, Released, Tick]


# ---- instructions -----------------------------------------------------------------------
@dataclass(frozen=True)
class Forward:
    """Pass the request on to the session's engine."""
    session_id: str


@dataclass(frozen=True)
class Open:
    """Record the session in Raft (the tenant's quota is checked there), then acquire its
    engine; answer with `Opened`."""
    session_id: str
    tenant: Optional[str]
    submitter: str
    user_id: str


@dataclass(frozen=True)
class Wait:
    """The session is being opened: wait for its `Opened`, then call again."""
    session_id: str


@dataclass(frozen=True)
class Refuse:
    code: Code
    message: str


@dataclass(frozen=True)
class Close:
    """Release the session in Spark (`in_spark`: its client did not), let its engine go,
    and record the close in Raft."""
    session_id: str
    reason: str
    in_spark: bool


Instruction = Union[Forward, Open, Wait, Refuse, Close]


@dataclass
class Entry:
    owner: str                 # the credential's name that opened it
    tenant: Optional[str]
    user_id: str
    phase: Phase
    last_used: float
    calls: int = 0             # requests running now (a long query is not idle)


def admission(who: Optional[Credential]) -> Optional[Refuse]:
    """Whether a caller may use the endpoint at all (None: yes). `who` None: the bearer
    is no credential of this cluster."""
    if who is None:
        return Refuse(Code.UNAUTHENTICATED, "missing or wrong token: connect with "
                      "sc://HOST:PORT/;token=<rest.auth.token, a token of jm token create, "
                      "or a JWT> (over TLS where REST has it)")
    if RANK.get(who.role, 0) < RANK[NEEDED]:
        return Refuse(Code.PERMISSION_DENIED, f"the {who.role or 'empty'} role may not run "
                      f"Spark work: a Connect session needs the {NEEDED} role")
    return None


@dataclass
class ConnectBook:
    sessions: dict[str, Entry] = field(default_factory=dict)
    closed: dict[str, str] = field(default_factory=dict)  # id -> why (insertion order)

    def handle(self, event: Event, now: float) -> list[Instruction]:
        if isinstance(event, Call):
            return [self._call(event, now)]
        if isinstance(event, CallDone):
            s = self.sessions.get(event.session_id)
            if s is not None:
                s.calls = max(0, s.calls - 1)
                s.last_used = now
            return []
        if isinstance(event, Opened):
            s = self.sessions.get(event.session_id)
            if s is None:
                return []
            if event.refusal is not None:
                del self.sessions[event.session_id]
                return []
            s.phase, s.last_used = Phase.OPEN, now
            return []
        if isinstance(event, Released):
            if self.sessions.pop(event.session_id, None) is None:
                return []
            self._remember(event.session_id, "released by its client")
            return [Close(event.session_id, "released", in_spark=False)]
        if isinstance(event, Tick):
            return self._sweep(event.idle_timeout, now)
        raise TypeError(f"not an event: {event!r}")

    def _call(self, call: Call, now: float) -> Instruction:
        s = self.sessions.get(call.session_id)
        if s is None:
            why = self.closed.get(call.session_id)
            if why is not None:
                return Refuse(Code.NOT_FOUND, f"session {call.session_id} is closed ({why}); "
                              "create a new SparkSession")
            self.sessions[call.session_id] = Entry(call.who.name, call.who.tenant,
                                                   call.user_id, Phase.OPENING, now)
            return Open(call.session_id, call.who.tenant, call.who.name, call.user_id)
        if s.owner != call.who.name:
            return Refuse(Code.PERMISSION_DENIED,
                          f"session {call.session_id} is another credential's")
        if s.phase is Phase.OPENING:
            return Wait(call.session_id)
        s.calls += 1
        s.last_used = now
        return Forward(call.session_id)

    def _sweep(self, idle_timeout: float, now: float) -> list[Instruction]:
        out: list[Instruction] = []
        for sid, s in list(self.sessions.items()):
            if s.phase is Phase.OPEN and s.calls == 0 and now - s.last_used >= idle_timeout:
                del self.sessions[sid]
                self._remember(sid, f"idle for more than {idle_timeout:.0f} s")
                out.append(Close(sid, "idle", in_spark=True))
        return out

    def close_all(self, reason: str) -> list[Instruction]:
        """Every open session (the peer stops)."""
        out: list[Instruction] = [Close(sid, reason, in_spark=True)
                                  for sid, s in self.sessions.items() if s.phase is Phase.OPEN]
        self.sessions.clear()
        return out

    def _remember(self, session_id: str, why: str) -> None:
        self.closed[session_id] = why
        while len(self.closed) > REMEMBER_CLOSED:
            del self.closed[next(iter(self.closed))]
