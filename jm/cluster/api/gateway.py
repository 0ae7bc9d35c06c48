"""The REST gateway of a peer: what `rest/` may ask of it (the `Gateway` protocol in
rest/gateway.py), one object per role, each built here from the peer's services
(jm/cluster/api/services.py) with only what it uses.

Reads come from this peer's replica; writes are Raft commands acknowledged once applied
here (jm/cluster/api/apiwrites.py). Failures leave as `ApiError`s with their HTTP status."""
from __future__ import annotations

from dataclasses import dataclass

from jm.cluster.api.apiwrites import Writes
from jm.cluster.api.artifactsapi import Artifacts
from jm.cluster.api.auditapi import PeerAudit
from jm.cluster.api.clusterapi import ClusterApi
from jm.cluster.api.health import PeerHealth
from jm.cluster.api.jobwrites import JobWrites
from jm.cluster.api.livybatches import LivyBatches
from jm.cluster.api.pipelines import Pipelines
from jm.cluster.api.reads import JobViews
from jm.cluster.api.resolver import SubmissionResolver
from jm.cluster.api.services import GatewayServices
from jm.cluster.api.sessionviews import SessionViews
from jm.cluster.sql.sqlgateway import SqlGateway
from jm.cluster.api.tenancy import Tenants
from jm.cluster.api.tokens import Tokens
from jm.cluster.metrics import peer_gauges


@dataclass(frozen=True)
class PeerGateway:
    """Implements rest.gateway.Gateway for one peer."""
    jobs: JobWrites            # submit, cancel, savepoint
    views: JobViews            # jobs as the replica shows them, pages, logs
    batches: LivyBatches       # Livy's /batches
    artifacts: Artifacts
    pipelines: Pipelines
    cluster: ClusterApi        # members, identity, promotions, drains, beats, rebalance
    health: PeerHealth         # /health, /ready, the gauges
    replica: Writes            # the applied index (X-JM-Index, X-JM-Min-Index)
    tokens: Tokens
    tenants: Tenants
    audit: PeerAudit
    sql: SqlGateway
    sessions: SessionViews     # every session of every kind
    max_spec_size: int         # jobmanager.spec.max-size: REST refuses a larger spec unread


def build_gateway(svc: GatewayServices) -> PeerGateway:
    conf, raft = svc.conf, svc.raft
    writes = Writes(raft, svc.lease, svc.started, conf["rest.write-timeout"])
    artifacts = Artifacts(svc.node, raft, writes, svc.blobs, svc.shared_blobs)
    resolver = SubmissionResolver(conf, raft, writes, artifacts)
    tenants = Tenants(raft, writes)
    jobs = JobWrites(raft, writes, resolver, svc.submitter)
    views = JobViews(node=svc.node, raft=raft, writes=writes, lists=svc.lists,
                     quota_reason=tenants.quota_reason, url_of=svc.url_of,
                     peer_client=svc.peer_client, log_dir=svc.log_dir)
    return PeerGateway(
        jobs=jobs, views=views, batches=LivyBatches(raft, jobs, views), artifacts=artifacts,
        pipelines=Pipelines(raft, writes, resolver),
        cluster=ClusterApi(node=svc.node, conf=conf, raft=raft, writes=writes,
                           lease=svc.lease, rounds=svc.rounds, voting=svc.voting,
                           candidate=svc.candidate, had_data=svc.had_data),
        health=PeerHealth(node=svc.node, raft=raft, writes=writes, lease=svc.lease,
                          started=svc.started, data_dir=svc.data_dir, spark=svc.spark,
                          spark_remote=svc.spark_remote, engines=svc.engines,
                          gauges=lambda: peer_gauges(svc, writes.leader())),
        replica=writes, tokens=Tokens(conf, raft, writes),
        tenants=tenants,
        audit=PeerAudit(node=svc.node, conf=conf, raft=raft, log_dir=svc.log_dir,
                        url_of=svc.url_of, peer_client=svc.peer_client),
        sql=svc.sql, sessions=SessionViews(raft),
        max_spec_size=conf["jobmanager.spec.max-size"])
