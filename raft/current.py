"""The pysyncobj node a Raft member runs now, with its consumer: a non-voting member's
read-only node until a promotion hands over to its voting node (raft/handover.py), which
replaces all four at once under the host's gate. Read by the host and its roles (the
membership view, the promotion) instead of each holding the node."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from raft.consumer import StateConsumer
from raft.transport import WireTransport


@dataclass
class CurrentNode:
    syncobj: Any                         # a raft/raftnode.py RaftNode (None: being made)
    consumer: StateConsumer              # holds the ClusterState it applies
    is_voter: bool
    transport: Optional[WireTransport]   # its Raft connections (None: another transport)
