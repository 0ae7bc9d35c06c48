"""Pure placement policy: which waiting job goes to which live peer.

Least-loaded first: each job (in submission order) goes to the live peer with the
lowest share of its slots in use, ties broken by more free slots, then by a hash of
(job, node) (rendezvous hashing), so that short jobs placed one at a time on idle
peers still spread over all of them instead of always landing on the same one.
Peers whose Spark is not up yet (a peer that just started) come after ready peers, so a
job does not wait for a JVM to start while a ready peer has room.
`by-tenant` keeps a tenant's jobs together (least-loaded among the peers that already run
work of its tenant, spilling to the least-loaded other peer when those are full), so
that at `spark.connect.share-level: tenant` a tenant has engines on as few peers as its
slots allow instead of one on every peer.
A job of a tenant whose OS user a peer's host lacks goes to the peers that have it (and
waits for room there); only when no peer has it is it placed as if all had, to fail its
attempt with UserNotFound naming the user rather than wait for ever.
A job that fits nowhere keeps waiting (CREATED); smaller jobs behind it may still
be placed. No I/O, no clock.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class PeerLoad:
    node: str
    slots: int
    used: int
    ready: bool = True
    lacks: frozenset = frozenset()  # tenants whose os-user its host has no account for


@dataclass(frozen=True)
class Waiting:
    job_id: str
    slots: int
    epoch: int
    tenant: str = "default"  # its tenant's quota key (jm/policy/members/quota.py)


def _tie(job_id: str, node: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{job_id}@{node}".encode(), digest_size=8).digest(),
                          "big")


MODES = ("spread", "pack", "leader-only", "by-tenant")


def place(waiting: list[Waiting], peers: list[PeerLoad], mode: str = "spread",
          leader: str | None = None, room: dict[str, int] | None = None,
          hosting: dict[str, set] | None = None) -> list[tuple[str, str, int]]:
    """Return (job_id, node, expected_epoch) for every job that fits somewhere, and
    within its tenant's `room` (slots it may still take; a tenant not in it has no
    quota): a job over it waits, smaller jobs of its tenant behind it may go.

    spread: least-loaded peer first (work sharing, the default);
    pack: fill the most-loaded peer that still fits before the next;
    leader-only: every job on the leader, standbys idle (Flink's classic session mode);
    by-tenant: least-loaded among the peers `hosting` (node -> tenants) its tenant first.
    """
    if mode == "leader-only":
        peers = [p for p in peers if p.node == leader]
    used = {p.node: p.used for p in peers}
    total = {p.node: p.slots for p in peers}
    waits = {p.node: not p.ready for p in peers}
    left = dict(room or {})
    hosts = {node: set(t) for node, t in (hosting or {}).items()}
    lacks = {p.node: p.lacks for p in peers if p.lacks}
    out = []
    for job in waiting:
        if job.tenant in left and job.slots > left[job.tenant]:
            continue
        best = None
        able = [n for n in total if job.tenant not in lacks.get(n, ())] if lacks else total
        for node in able or total:
            free = total[node] - used[node]
            if free < job.slots:
                continue
            share = used[node] / total[node]
            if mode == "pack":
                key = (waits[node], -share, free, _tie(job.job_id, node), node)
            elif mode == "by-tenant":
                key = (waits[node], job.tenant not in hosts.get(node, ()), share, -free,
                       _tie(job.job_id, node), node)
            else:
                key = (waits[node], share, -free, _tie(job.job_id, node), node)
            if best is None or key < best[0]:
                best = (key, node)
        if best is not None:
            node = best[1]
            used[node] += job.slots
            hosts.setdefault(node, set()).add(job.tenant)
            if job.tenant in left:
                left[job.tenant] -= job.slots
            out.append((job.job_id, node, job.epoch))
    return out
