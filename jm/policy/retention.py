"""The job store's retention (Flink's jobstore.expiration-time and jobstore.max-capacity):
which ended jobs the ResourceManager asks the cluster to forget. Pure: no I/O, no clock."""
from __future__ import annotations

from typing import Any

from raft.records import TERMINAL


def expired_jobs(state: Any, now: float, expiration: float, capacity: int,
                 limit: int = 5000) -> list[str]:
    """Pure: ended jobs older than `expiration`, plus the oldest ended jobs beyond
    `capacity` ended jobs kept."""
    ended = [(j.end_time or 0.0, j.id) for j in state.jobs.values() if j.status in TERMINAL]
    ended.sort()
    out = [jid for t, jid in ended if now - t > expiration]
    keep = ended[len(out):]
    if len(keep) > capacity:
        out += [jid for _, jid in keep[:len(keep) - capacity]]
    return out[:limit]
