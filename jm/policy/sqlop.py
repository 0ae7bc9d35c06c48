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
