"""A peer's own health, as REST and Prometheus ask it: GET /health and /ready, and the
gauges read at scrape time (jm/cluster/metrics.py)."""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Callable, Optional

from jm.cluster.api.apiwrites import Writes

if TYPE_CHECKING:
    from jm.cluster.members.lease import Lease
    from jm.cluster.spark.engines import Engines
    from jm.runtime.sparkserver import SparkConnectServer
    from raft.node import RaftHost


class PeerHealth:
    def __init__(self, *, node: str, raft: "RaftHost", writes: Writes, lease: "Lease",
                 started: Callable[[], bool], data_dir: str,
                 spark: Optional["SparkConnectServer"], spark_remote: Callable[[], Optional[str]],
                 engines: Optional["Engines"], gauges: Callable[[], dict]) -> None:
        """`spark`: the peer engine (None at other share levels, or without engines);
        `gauges`: the Prometheus gauges read at scrape time (jm/cluster/metrics.py)."""
        self.node, self.raft, self.writes, self.lease = node, raft, writes, lease
        self.started, self.data_dir = started, data_dir
        self.spark, self.spark_remote, self.engines = spark, spark_remote, engines
        self.gauges = gauges

    def readiness(self) -> dict:
        registered = self.lease.registered.is_set()
        lease = self.lease.term.valid()
        started = self.started()
        why = [w for w, bad in (("not started", not started), ("not registered", not registered),
                                ("lease not valid", not lease)) if bad]
        return {"ready": not why, "node": self.node, "registered": registered,
                "lease-valid": lease, "started": started, "reasons": why}

    def report(self) -> dict:
        leader = self.writes.leader()
        disk = self.raft.disk_trouble()
        registered = self.lease.registered.is_set()
        try:
            st = os.statvfs(self.data_dir)
            free: Optional[int] = st.f_bavail * st.f_frsize
        except OSError:
            free = None
        spark, engines = self.spark, self.engines
        out = {"ok": leader is not None and registered and disk is None,
               "node": self.node, "leader": leader, "registered": registered,
               # (at share-level tenant or job, engines start with their work)
               "spark-ready": bool(spark.ready.is_set() if spark is not None
                                   else engines is not None and engines.embedded),
               "spark-remote": _no_token(self.spark_remote()), "disk-problem": disk,
               "disk-free": free}
        if engines is not None and engines.embedded:
            out["share-level"] = engines.level.value
            out["engines"] = engines.rows()
        return out


def _no_token(remote: Optional[str]) -> Optional[str]:
    """A Spark Connect URL as it may be shown: its `token` parameter hidden."""
    return remote and re.sub(r";token=[^;]*", ";token=(hidden)", remote)
