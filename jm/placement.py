"""Pure placement policy: which waiting job goes to which live peer.

Least-loaded first: each job (in submission order) goes to the live peer with the
lowest share of its slots in use, ties broken by more free slots, then node id.
A job that fits nowhere keeps waiting (CREATED); smaller jobs behind it may still
be placed. No I/O, no clock.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PeerLoad:
    node: str
    slots: int
    used: int


@dataclass(frozen=True)
class Waiting:
    job_id: str
    slots: int
    epoch: int


def place(waiting: list[Waiting], peers: list[PeerLoad]) -> list[tuple[str, str, int]]:
    """Return (job_id, node, expected_epoch) for every job that fits somewhere."""
    used = {p.node: p.used for p in peers}
    total = {p.node: p.slots for p in peers}
    out = []
    for job in waiting:
        best = None
        for node in total:
            free = total[node] - used[node]
            if free < job.slots:
                continue
            key = (used[node] / total[node], -free, node)
            if best is None or key < best[0]:
                best = (key, node)
        if best is not None:
            node = best[1]
            used[node] += job.slots
            out.append((job.job_id, node, job.epoch))
    return out
