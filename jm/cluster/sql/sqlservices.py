"""The services a peer hands its SQL gateway (built by Peer.start once every component
exists; the gateway never sees the peer itself)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping

if TYPE_CHECKING:
    from jm.cluster.spark.engines import Engines
    from jm.config import Config
    from raft.node import RaftHost


@dataclass(frozen=True)
class SqlServices:
    node: str
    conf: "Config"
    raft: "RaftHost"
    lease_valid: Callable[[], bool]         # nothing runs here without a lease
    engines: "Engines"                      # a session's engine (its tenant's, the peer's)
    url_of: Callable[[str, int], str]       # (host, REST port) -> a peer's base URL
    log_dir: str
    guard: Callable[[str, int], None]       # (name, pid): killed with the job processes
    child_env: Mapping[str, str]            # what the SQL worker's environment adds
    deps: Any = None                        # SessionDepsHolder: sessions' files, Python
