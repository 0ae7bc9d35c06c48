"""The job store's retention (Flink's jobstore.expiration-time and jobstore.max-capacity):
which ended jobs the ResourceManager asks the cluster to forget. Pure: no I/O, no clock.

Clocks: a job's `end_time` is stamped with the wall clock of the peer that reported the
end (its owner), so comparing it with the deciding leader's clock would compare two hosts'
clocks: an owner whose clock runs 30 s ahead would have its jobs kept 30 s longer, one a
day behind would have them forgotten at once. Retention therefore never reads `end_time`.
The deciding peer counts each ended job's age from when *it* first saw the job ended, on
its own monotonic clock (as liveness counts from its own apply time): `track_ended` keeps
that record, `expired_jobs` decides from it. A new leader starts counting from its own
first look, so a job may be kept up to one expiration longer after a leader change, never
forgotten early."""
from __future__ import annotations

from typing import Any


def track_ended(state: Any, seen: dict[str, float], now: float) -> dict[str, float]:
    """`seen` (job id -> this peer's monotonic time when it first saw the job ended)
    brought up to date with `state` at `now`, in place, and returned: the jobs that ended
    since (the tail of `state.ended`, which keeps ended jobs in the order they ended) are
    added at `now`; the cost is the number of new ones, not of all jobs. Jobs no longer
    there are dropped: the purge's caller drops those it purged, and `seen` holding more
    than the state has ended is rebuilt. The order is the order they were first seen."""
    ended = state.ended
    if len(seen) > len(ended):
        seen = {jid: t for jid, t in seen.items() if jid in ended}
    new = []
    for jid in reversed(ended):
        if jid in seen:
            break
        new.append(jid)
    for jid in reversed(new):
        seen[jid] = now
    return seen


def expired_jobs(seen: dict[str, float], now: float, expiration: float, capacity: int,
                 limit: int = 5000) -> list[str]:
    """Pure: the ended jobs seen ended more than `expiration` ago, plus the earliest seen
    beyond `capacity` ended jobs kept. `seen` and `now` come from one monotonic clock
    (track_ended); ties keep `seen`'s order, so nothing compares times of two hosts."""
    ended = sorted(seen.items(), key=lambda kv: kv[1])  # stable: ties keep first-seen order
    out = [jid for jid, t in ended if now - t > expiration]
    keep = ended[len(out):]
    if len(keep) > capacity:
        out += [jid for jid, _ in keep[:len(keep) - capacity]]
    return out[:limit]


PURGE_BATCH_BYTES = 64 * 1024  # job ids per PurgeJobs command, in encoded bytes


def purge_batches(ids: list[str], max_bytes: int = PURGE_BATCH_BYTES) -> list[tuple]:
    """Pure: `ids` in PurgeJobs-sized chunks of at most `max_bytes` (each id counted as its
    UTF-8 length plus msgpack's few bytes of framing), at least one id each."""
    out: list[tuple] = []
    chunk: list[str] = []
    size = 0
    for jid in ids:
        n = len(jid.encode("utf-8", "backslashreplace")) + 3
        if chunk and size + n > max_bytes:
            out.append(tuple(chunk))
            chunk, size = [], 0
        chunk.append(jid)
        size += n
    if chunk:
        out.append(tuple(chunk))
    return out
