"""Pure rebalancing and drain policy: which running streaming jobs move where.

Each peer's fair share of the used slots is proportional to its weight
(`jobmanager.weight`, by default its slot count). A peer's deviation is its used slots
minus its share. A round moves jobs from the most over-loaded peer to the most
under-loaded one while the spread of deviations exceeds `rebalance.threshold`, and only
when the move strictly lowers the sum of squared deviations (a job of s slots moves only
if the gap between the two peers exceeds s), so rounds never undo each other and a
sequence of rounds ends. Never more than `limit` moves, never beyond a target's slots,
only movable jobs (streaming, not stopping, cancelling or already moving).

Drain: every movable job of a draining peer is placed on the other peers by the
placement policy of the cluster (jm.policy.members.placement), up to `limit`.
No I/O, no clock.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

from jm.policy.members.placement import PeerLoad, Waiting, place


@dataclass(frozen=True)
class PeerInfo:
    node: str
    slots: int
    weight: float  # > 0
    used: int      # slots of jobs that run (or are moving) there
    eligible: bool = True  # alive, ready, not draining
    lacks: frozenset = frozenset()  # tenants whose os-user its host has no account for


@dataclass(frozen=True)
class JobInfo:
    job_id: str
    node: str
    slots: int
    epoch: int
    movable: bool = True
    tenant: str = "default"  # its tenant's key (a peer that lacks its user gets none)


@dataclass(frozen=True)
class PlannedMove:
    job_id: str
    source: str
    target: str
    epoch: int


def deviations(peers: list[PeerInfo]) -> dict[str, float]:
    """used - fair share, over the eligible peers."""
    el = [p for p in peers if p.eligible]
    total_w = sum(p.weight for p in el)
    total_used = sum(p.used for p in el)
    if total_w <= 0:
        return {}
    return {p.node: p.used - total_used * p.weight / total_w for p in el}


def spread(peers: list[PeerInfo]) -> float:
    d = deviations(peers)
    return max(d.values()) - min(d.values()) if d else 0.0


def _order(job_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(job_id.encode(), digest_size=8).digest(), "big")


def plan_rebalance(peers: list[PeerInfo], jobs: list[JobInfo], threshold: float,
                   limit: int) -> list[PlannedMove]:
    el = {p.node: p for p in peers if p.eligible}
    if len(el) < 2 or limit <= 0:
        return []
    used = {n: p.used for n, p in el.items()}
    total_w = sum(p.weight for p in el.values())
    total_used = sum(used.values())
    share = {n: total_used * p.weight / total_w for n, p in el.items()}
    movable: dict[str, list[JobInfo]] = {n: [] for n in el}
    for j in jobs:
        if j.movable and j.node in movable:
            movable[j.node].append(j)
    for lst in movable.values():  # bigger jobs first, then a stable pseudo-random order
        lst.sort(key=lambda j: (-j.slots, _order(j.job_id)))
    moves: list[PlannedMove] = []
    while len(moves) < limit:
        dev = {n: used[n] - share[n] for n in el}
        if max(dev.values()) - min(dev.values()) <= threshold + 1e-9:
            break
        best = None
        for src in sorted(el, key=lambda n: (-dev[n], n)):
            for dst in sorted(el, key=lambda n: (dev[n], n)):
                gap = dev[src] - dev[dst]
                if gap <= 1e-9:
                    break
                for j in movable[src]:
                    if j.slots < gap - 1e-9 and used[dst] + j.slots <= el[dst].slots \
                            and j.tenant not in el[dst].lacks:
                        best = (j, src, dst)
                        break
                if best:
                    break
            if best:
                break
        if best is None:
            break
        j, src, dst = best
        movable[src].remove(j)
        used[src] -= j.slots
        used[dst] += j.slots
        moves.append(PlannedMove(j.job_id, src, dst, j.epoch))
    return moves


def plan_drain(peers: list[PeerInfo], jobs: list[JobInfo], draining: set[str], limit: int,
               mode: str = "spread", leader: str | None = None) -> list[PlannedMove]:
    """Move the movable jobs of draining peers to the eligible peers, placed like new jobs."""
    if limit <= 0:
        return []
    leaving = sorted((j for j in jobs if j.node in draining and j.movable),
                     key=lambda j: (j.node, _order(j.job_id)))[:limit]
    if not leaving:
        return []
    targets = [PeerLoad(p.node, p.slots, p.used, lacks=p.lacks) for p in peers
               if p.eligible and p.node not in draining]
    source = {j.job_id: j.node for j in leaving}
    decisions = place([Waiting(j.job_id, j.slots, j.epoch, j.tenant) for j in leaving],
                      targets, mode, leader)
    return [PlannedMove(job_id, source[job_id], node, epoch) for job_id, node, epoch in decisions]
