"""The status of a SQL gateway operation and the changes it may go through (pure), after
Flink's SQL Gateway (`OperationStatus.isValidStatusTransition`, `Operation.updateState`):
every change of an operation's status goes through `update_state`, checked against one
table, instead of a guard at each place that writes it.

    RUNNING  -> FINISHED, CANCELED, ERROR, CLOSED
    FINISHED -> ERROR (a later page could not be read), CLOSED
    CANCELED -> CLOSED
    ERROR    -> CLOSED
    CLOSED   -> (nothing)

A refused change is a value (`Refused`), not an exception: it is what a race looks like
(a statement that ends after it was cancelled keeps CANCELED), and the caller decides.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Mapping, Optional, Union

from jm.policy.sql.sqlstmt import READ, STATE


class OpStatus(str, Enum):
    """Flink's OperationStatus names, as the REST API answers them."""
    RUNNING = "RUNNING"
    FINISHED = "FINISHED"
    CANCELED = "CANCELED"
    ERROR = "ERROR"
    CLOSED = "CLOSED"


TRANSITIONS: Mapping[OpStatus, frozenset] = {
    OpStatus.RUNNING: frozenset({OpStatus.FINISHED, OpStatus.CANCELED, OpStatus.ERROR,
                                 OpStatus.CLOSED}),
    OpStatus.FINISHED: frozenset({OpStatus.ERROR, OpStatus.CLOSED}),
    OpStatus.CANCELED: frozenset({OpStatus.CLOSED}),
    OpStatus.ERROR: frozenset({OpStatus.CLOSED}),
    OpStatus.CLOSED: frozenset(),
}


@dataclass(frozen=True)
class OpState:
    """An operation's status, and for ERROR the reason."""
    status: OpStatus = OpStatus.RUNNING
    error: Optional[str] = None


@dataclass(frozen=True)
class Refused:
    """A change of status the table does not allow; the state stays `current`."""
    current: OpStatus
    to: OpStatus

    def __str__(self) -> str:
        may = ", ".join(s.value for s in allowed(self.current)) or "nothing"
        return (f"an operation that is {self.current.value} cannot become "
                f"{self.to.value} (it may become: {may})")


def allowed(current: OpStatus) -> list[OpStatus]:
    """What an operation that is `current` may become, in the enum's order."""
    return [s for s in OpStatus if s in TRANSITIONS[current]]


def update_state(state: OpState, to: OpStatus, error: Optional[str] = None
                 ) -> Union[OpState, Refused]:
    """The state after a change to `to` (`error`: ERROR's reason), or why it is refused."""
    if to not in TRANSITIONS[state.status]:
        return Refused(state.status, to)
    return OpState(to, error if to is OpStatus.ERROR else None)


# ---- an operation whose peer died: what its session's next holder answers ------------
LOST_WRITE = ("the peer running this statement died while it ran, so it may or may not have "
              "taken effect; check, and run it again if needed (the session goes on)")


@dataclass(frozen=True)
class Adoption:
    """What the session's next holder does with an operation the record knows and it does
    not: `rerun` it (a read, or a session-defining statement that was not kept), or
    answer `state` (an end the record holds, or a write that may or may not have run)."""
    rerun: bool
    state: OpState = OpState()


def adoption(record: Mapping) -> Adoption:
    """`record`: the operation in its session's replicated record ("statement", "kind",
    and "end" and "error" once it ended). A write never runs twice: ended, its end is
    the answer; not ended, the answer says it may or may not have run."""
    end = record.get("end")
    if end == OpStatus.FINISHED.value:
        return Adoption(False, OpState(OpStatus.FINISHED))
    if end == OpStatus.ERROR.value:
        return Adoption(False, OpState(OpStatus.ERROR, record.get("error")
                                       or "the statement failed"))
    if record.get("kind") in (READ, STATE) and record.get("statement"):
        return Adoption(True)
    return Adoption(False, OpState(OpStatus.ERROR, LOST_WRITE))
