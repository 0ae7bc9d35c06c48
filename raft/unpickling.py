"""pysyncobj's own unpickling of log entries and snapshots, through raft/wire.py's
restricted unpickler: `install()` (run on import, and so on importing raft/transport.py)
replaces the `pickle` of pysyncobj's syncobj, serializer and tcp_connection modules."""
from __future__ import annotations

from typing import Any

from pysyncobj import serializer as pser
from pysyncobj import syncobj as ps
from pysyncobj import tcp_connection as ptc

from raft import wire


class _EntryPickle:
    """Stands in for pysyncobj.pickle in pysyncobj.syncobj: log entries (commands,
    membership changes, a big entry sent in parts) are read with the restricted unpickler."""

    def __init__(self, original: Any) -> None:
        self.original = original
        self.dumps = original.dumps
        self.dump = original.dump
        self.to_bytes = original.to_bytes

    def loads(self, data: Any) -> Any:
        return wire.loads(self.original.to_bytes(data), wire.COMMAND_NAMES)

    def load(self, file: Any) -> Any:
        return wire.load(file, wire.COMMAND_NAMES, state_classes=False)


class _SnapshotPickle(_EntryPickle):
    """... and in pysyncobj.serializer: a snapshot (raft.dump, or one a leader sent)."""

    def loads(self, data: Any) -> Any:
        return wire.loads(self.original.to_bytes(data), wire.SNAPSHOT_NAMES, state_classes=True)

    def load(self, file: Any) -> Any:
        return wire.load(file, wire.SNAPSHOT_NAMES, state_classes=True)


def install() -> None:
    """Idempotent. Also pysyncobj's own TcpConnection (if anything made one) reads
    messages with the restricted unpickler."""
    if not isinstance(ps.pickle, _EntryPickle):
        ps.pickle = _EntryPickle(ps.pickle)
    if not isinstance(pser.pickle, _SnapshotPickle):
        pser.pickle = _SnapshotPickle(pser.pickle)
    if not isinstance(ptc.pickle, _EntryPickle):
        wire_only = _EntryPickle(ptc.pickle)
        wire_only.loads = lambda data: wire.loads(wire_only.original.to_bytes(data))
        ptc.pickle = wire_only


install()
