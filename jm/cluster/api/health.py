"""A peer's own health, as REST and Prometheus ask it: GET /health and /ready, and the
gauges read at scrape time (jm/cluster/metrics.py)."""
from __future__ import annotations

import os
import re
from typing import Optional

from jm.cluster.api.apiwrites import Writes
from jm.cluster.api.services import GatewayServices


class PeerHealth:
    def __init__(self, svc: GatewayServices, writes: Writes) -> None:
        self.svc, self.writes, self.node, self.raft = svc, writes, svc.node, svc.raft

    def gauges(self) -> dict:
        """Prometheus gauges, read at scrape time (jm/cluster/metrics.py)."""
        from jm.cluster.metrics import peer_gauges
        return peer_gauges(self.svc, self.writes.leader())

    def readiness(self) -> dict:
        registered = self.svc.lease.registered.is_set()
        lease = self.svc.lease.term.valid()
        started = self.svc.started()
        why = [w for w, bad in (("not started", not started), ("not registered", not registered),
                                ("lease not valid", not lease)) if bad]
        return {"ready": not why, "node": self.node, "registered": registered,
                "lease-valid": lease, "started": started, "reasons": why}

    def report(self) -> dict:
        leader = self.writes.leader()
        disk = self.raft.disk_trouble()
        registered = self.svc.lease.registered.is_set()
        try:
            st = os.statvfs(self.svc.data_dir)
            free: Optional[int] = st.f_bavail * st.f_frsize
        except OSError:
            free = None
        spark, engines = self.svc.spark, self.svc.engines
        out = {"ok": leader is not None and registered and disk is None,
               "node": self.node, "leader": leader, "registered": registered,
               # (at share-level tenant or job, engines start with their work)
               "spark-ready": bool(spark.ready.is_set() if spark is not None
                                   else engines is not None and engines.embedded),
               "spark-remote": _no_token(self.svc.spark_remote()), "disk-problem": disk,
               "disk-free": free}
        if engines is not None and engines.embedded:
            out["share-level"] = engines.level.value
            out["engines"] = engines.rows()
        return out


def _no_token(remote: Optional[str]) -> Optional[str]:
    """A Spark Connect URL as it may be shown: its `token` parameter hidden."""
    return remote and re.sub(r";token=[^;]*", ";token=(hidden)", remote)
