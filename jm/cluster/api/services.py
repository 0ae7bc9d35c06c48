"""The services a peer hands its REST gateway (built by Peer.start once every component
exists; the gateway never sees the peer itself)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:
    from jm.cluster.submitroute import SubmitRoute
    from jm.cluster.members.beats import LeaseRounds
    from jm.cluster.blobs import BlobStore
    from jm.cluster.spark.engines import Engines
    from jm.cluster.api.joblists import JobLists
    from jm.cluster.members.lease import Lease
    from jm.cluster.peerclient import PeerClient
    from jm.cluster.sql.sqlgateway import SqlGateway
    from jm.cluster.members.voting import VoterCandidate, VotingCore
    from jm.config import Config
    from jm.runtime.executor import Executor
    from jm.runtime.sparkserver import SparkConnectServer
    from raft.node import RaftHost


@dataclass(frozen=True)
class GatewayServices:
    node: str
    conf: "Config"
    raft: "RaftHost"
    lease: "Lease"
    rounds: "LeaseRounds"                   # the leader's heartbeat rounds
    submitter: "SubmitRoute"                # job submissions, into the leader's batches
    executor: "Executor"
    sql: "SqlGateway"
    spark: Optional["SparkConnectServer"]   # the embedded Connect server, if any
    spark_remote: Callable[[], Optional[str]]  # the Connect URL this peer's jobs use
    blobs: "BlobStore"                      # this peer's artifacts
    shared_blobs: "BlobStore"               # their copies in high-availability.storageDir
    voting: "VotingCore"                    # promotions of non-voters
    candidate: "VoterCandidate"             # this peer becoming a voter
    peer_client: "PeerClient"               # HTTP to the other peers
    url_of: Callable[[str, int], str]       # (host, REST port) -> a peer's base URL
    lists: "JobLists"                       # pages of jobs, the overview's rows
    data_dir: str
    log_dir: str
    disk_low: Callable[[], Optional[str]]   # why the disk is low (jobmanager.disk.min-free)
    started: Callable[[], bool]             # every component runs (writes 503 before)
    had_data: bool = False                  # it started with Raft data (a member before)
    engines: Optional["Engines"] = None     # every engine of the peer (share levels)
