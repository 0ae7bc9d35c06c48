"""Pure: a peer's pod in a Kubernetes StatefulSet joins and leaves the cluster's membership
as the StatefulSet scales (jm/local/kube.py runs it: the container's start and its preStop).

* Start: a pod whose peer is not a member (a pod added by scaling up, or one scaled away
  before and back now) asks a seed to add it (`POST /cluster/peers`); a member, or a pod
  that no seed answers for (the cluster is being created from conf/masters), starts as is.
* preStop: a pod whose ordinal is at or past the StatefulSet's desired replicas is being
  scaled away: it asks the cluster to remove it (`DELETE /cluster/peers/{node}`, which
  drains it first) and waits until it is gone. Any other pod's end (a rolling update, a
  node drain, an eviction) is a restart: SIGTERM drains it, and it comes back a member.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

START, ADD = "start", "add"


@dataclass(frozen=True)
class JoinDecision:
    action: str   # START: start as is; ADD: POST /cluster/peers first
    reason: str


def ordinal(pod_name: str) -> Optional[int]:
    """The StatefulSet ordinal of a pod name (`jm-3` -> 3), None if it has none."""
    base, _, num = pod_name.rpartition("-")
    return int(num) if base and num.isdigit() else None


def scaled_away(pod_name: str, desired_replicas: Optional[int]) -> bool:
    """A StatefulSet scales down by deleting its highest ordinals: this pod goes for good
    when its ordinal is not below the desired replicas. Unknown replicas: not scaled away
    (the SIGTERM drain handles it as a restart; a peer that never comes back is replaced
    by the voting core's healing)."""
    n = ordinal(pod_name)
    return n is not None and desired_replicas is not None and n >= desired_replicas


def how_to_join(node: str, answer: Optional[Any]) -> JoinDecision:
    """`answer`: a seed's `GET /cluster/peers` (None: no seed answered)."""
    if not isinstance(answer, dict):
        return JoinDecision(START, "no seed answered: the cluster is being created")
    members = {m.get("id") for m in answer.get("members") or [] if isinstance(m, dict)}
    readers = {m.get("id") for m in answer.get("non-voters") or [] if isinstance(m, dict)}
    if node in members or node in readers:
        return JoinDecision(START, "a member already")
    if node in (answer.get("removed") or []):
        return JoinDecision(ADD, "removed before (scaled away): joins anew")
    return JoinDecision(ADD, "not a member yet (scaled up)")


def gone(node: str, answer: Optional[Any]) -> bool:
    """After `DELETE /cluster/peers/{node}`: the removal is complete (`GET /cluster/peers`
    lists it as removed and no longer as a member)."""
    if not isinstance(answer, dict):
        return False
    members = {m.get("id") for m in answer.get("members") or [] if isinstance(m, dict)}
    readers = {m.get("id") for m in answer.get("non-voters") or [] if isinstance(m, dict)}
    return node in (answer.get("removed") or []) and node not in members | readers
