"""Tenants' slot quotas at placement (pure): a job whose tenant holds its quota waits
CREATED, and says why, even while peers have free slots: a burst of one tenant never
takes the slots the others are promised. Usage counts the slots of the tenant's jobs
that hold a slot (assigned to a peer); a job that waits holds none."""
from __future__ import annotations

from typing import Iterable, Mapping, Optional

DEFAULT = "default"  # the tenant of a job that names none (raft/tenants.py DEFAULT)


def tenant_key(tenant: Optional[str]) -> str:
    return tenant or DEFAULT


def usage(held: Iterable[tuple[Optional[str], int]]) -> dict[str, int]:
    """Slots held per tenant, from (tenant, slots) of every job that holds slots."""
    out: dict[str, int] = {}
    for tenant, slots in held:
        k = tenant_key(tenant)
        out[k] = out.get(k, 0) + slots
    return out


def room(quotas: Mapping[str, int], used: Mapping[str, int]) -> dict[str, int]:
    """The slots each tenant with a quota may still take (tenants without one: absent,
    no limit)."""
    return {t: max(0, q - used.get(t, 0)) for t, q in quotas.items() if q > 0}


def waiting_reason(tenant: Optional[str], slots: int, quotas: Mapping[str, int],
                   used: Mapping[str, int]) -> Optional[str]:
    """Why a waiting job of `tenant` needing `slots` is not placed for its quota, or
    None when its quota is not what holds it."""
    k = tenant_key(tenant)
    quota = quotas.get(k, 0)
    if quota <= 0:
        return None
    held = used.get(k, 0)
    if held + slots <= quota:
        return None
    if slots > quota:
        return (f"needs {slots} slots, more than tenant {k}'s quota of {quota}: it waits "
                f"until the quota is raised (jm tenant set {k} --slots N)")
    return (f"tenant {k} holds {held} of its {quota} slots (its quota); it waits for "
            "one of the tenant's jobs to end")
