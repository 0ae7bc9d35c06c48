"""How long this member's snapshots take (issue 27 item 4: "the time to take it").

pysyncobj compacts its log into a snapshot (`raft.dump`, or `raft.reader-dump` on a
non-voting member) when the log passes 20,000 entries or 10 minutes after the last one
(RaftSettings.log_compaction_min_*): its tick thread forks, and the child pickles and
writes the state while the member goes on. `SnapshotTimer` wraps the serializer of one
pysyncobj node to time both parts: the start (the fork, on the tick thread holding the
GIL: what the event loop and lease renewals may wait for) and the whole (until pysyncobj
sees the file written). The peer exports them (`jm_raft_snapshot_*` in /metrics)."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from raft.door import serializer_of


@dataclass(frozen=True)
class SnapshotStats:
    taken: int = 0             # snapshots written
    failed: int = 0            # snapshots that failed
    start_seconds: float = 0.0  # the last one's start on the tick thread (the fork)
    seconds: float = 0.0       # the last one, from its start until written


class SnapshotTimer:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.stats = SnapshotStats()
        self._began: Optional[float] = None
        self._start = 0.0

    def attach(self, syncobj: Any) -> "SnapshotTimer":
        """Wrap the serializer of `syncobj` (pysyncobj calls its methods through the
        instance, so instance attributes stand in for them)."""
        serializer = serializer_of(syncobj)
        serialize, check = serializer.serialize, serializer.checkSerializing

        def timed_serialize(data: Any, ident: Any) -> Any:
            t0 = self.clock()
            out = serialize(data, ident)
            if self._began is None:
                self._began, self._start = t0, self.clock() - t0
            return out

        def timed_check() -> Any:
            state, ident = check()
            if self._began is not None and state in (_SUCCESS, _FAILED):
                s = self.stats
                ok = state == _SUCCESS
                self.stats = SnapshotStats(
                    s.taken + ok, s.failed + (not ok),
                    self._start if ok else s.start_seconds,
                    self.clock() - self._began if ok else s.seconds)
                self._began = None
            return state, ident
        serializer.serialize, serializer.checkSerializing = timed_serialize, timed_check
        syncobj._jm_snapshots = self
        return self


def stats_of(syncobj: Any) -> SnapshotStats:
    timer = getattr(syncobj, "_jm_snapshots", None)
    return timer.stats if isinstance(timer, SnapshotTimer) else SnapshotStats()


def _states() -> tuple:
    from pysyncobj.config import SERIALIZER_STATE
    return SERIALIZER_STATE.SUCCESS, SERIALIZER_STATE.FAILED


_SUCCESS, _FAILED = _states()
