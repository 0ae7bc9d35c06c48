"""What the replicated state asks of a job's owner (cancel, stop with a savepoint, move,
savepoints), read from its record."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional

from raft import state as S


class Ending(Enum):
    """A request that ends the running attempt."""
    CANCEL = "cancel"
    STOP = "stop"      # with a savepoint
    MOVE = "move"      # to the peer a rebalance or a drain chose


@dataclass(frozen=True)
class Intents:
    """What the replicated state asks of this job's owner right now."""
    cancel: bool = False
    move_to: Optional[str] = None
    stop: Optional[tuple] = None          # (trigger id, target dir or None)
    savepoints: tuple = ()                # ((trigger id, target dir or None), ...)

    @staticmethod
    def of(job: S.JobRecord) -> "Intents":
        if not job.cancel_requested and job.move_to is None and not job.savepoints:
            return NONE  # (most jobs, read on every reconcile of their owner)
        stop = None
        plain = []
        for sp in job.pending_savepoints():
            if sp.stop and sp.id == job.stop_trigger:
                stop = (sp.id, sp.target)
            elif not sp.stop:
                plain.append((sp.id, sp.target))
        return Intents(job.cancel_requested, job.move_to, stop, tuple(plain))

    def kind(self) -> Optional[Ending]:
        """The request that ends the running attempt, or None."""
        return (Ending.CANCEL if self.cancel else Ending.STOP if self.stop
                else Ending.MOVE if self.move_to else None)


NONE = Intents()  # nothing asked
