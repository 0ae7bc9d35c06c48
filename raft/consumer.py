"""The pysyncobj consumer that holds a RaftHost's ClusterState (raft/node.py): it applies
each command on pysyncobj's tick thread under the state lock and notifies the host."""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from pysyncobj import SyncObjConsumer, replicated

from raft.commands import decode
from raft.state import ClusterState, Result

log = logging.getLogger("jm.raft")


class StateConsumer(SyncObjConsumer):
    def __init__(self, on_applied: Callable[[Any, Any, Result], None],
                 on_loaded: Callable[[Any], None], gate: threading.RLock) -> None:
        # attributes set before SyncObjConsumer.__init__ are not part of snapshots
        self.lock = threading.RLock()
        self.gate = gate  # shared with a promotion's second consumer (raft/promotion.py)
        self.frozen = False  # an abandoned promotion's: applies nothing more
        self.on_applied = on_applied
        self.on_loaded = on_loaded
        super().__init__()
        self.state = ClusterState()

    @replicated
    def apply(self, blob: bytes) -> Result:
        try:
            command = decode(blob)
        except Exception as exc:
            return Result.fail("invalid", f"undecodable command: {exc}")
        with self.gate:
            if self.frozen:
                return _ABANDONED
            with self.lock:
                result = self.state.apply(command)
            try:
                self.on_applied(self, command, result)
            except Exception:  # a notification problem must never stall the log
                log.exception("on_applied failed")
        return result

    def _deserialize(self, data: dict) -> None:
        """A snapshot replaces the state (at start-up, or sent by the leader to a follower
        that fell behind): the commands it holds were never applied here one by one."""
        with self.gate:
            if self.frozen:
                return
            with self.lock:
                super()._deserialize(data)
            try:
                self.on_loaded(self)
            except Exception:
                log.exception("on_loaded failed")


_ABANDONED = Result.fail("abandoned", "the promotion to voter was abandoned")
