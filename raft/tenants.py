"""Tenants' quotas in the replicated state (pure, like raft/state.py): `SetTenant` keeps
a tenant's slot and SQL-session quotas (0: no limit). The slot quota is kept by the
ResourceManager's placement (a job over it waits CREATED: jm/policy/quota.py); the
session quota here, when a session opens (raft/sessions.py), so that two peers opening
sessions at once cannot both take the last one. Jobs, sessions and artifacts carry
their tenant (None: the default tenant, named DEFAULT in quotas and lists)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from raft import commands as c
from raft.records import Result

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
OS_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")  # a POSIX user name (useradd's)
DEFAULT = "default"  # the tenant of jobs and sessions that name none
MAX_TENANTS = 10_000
MAX_QUOTA = 1_000_000


@dataclass
class TenantRecord:
    name: str
    slots: int = 0      # slots its jobs may hold at once (0: no limit)
    sessions: int = 0   # SQL and Livy sessions it may hold open (0: no limit)
    updated: float = 0.0
    os_user: str = ""   # the OS user its work runs as on every peer ("": none)


def key(tenant: Optional[str]) -> str:
    """The quota table's key of a record's tenant (None: the default tenant)."""
    return tenant or DEFAULT


def valid_name(name: object) -> bool:
    return isinstance(name, str) and NAME.fullmatch(name) is not None


def set_tenant(state, cmd: c.SetTenant) -> Result:
    if not valid_name(cmd.name):
        return Result.fail("invalid", "a tenant's name is 1-64 letters, digits, '.', '_' or "
                                      "'-', starting with a letter or digit")
    for field in ("slots", "sessions"):
        value = getattr(cmd, field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                  or not 0 <= value <= MAX_QUOTA):
            return Result.fail("invalid", f"{field} must be an integer from 0 (no limit) "
                                          f"to {MAX_QUOTA}")
    os_user = getattr(cmd, "os_user", None)
    if os_user is not None and (not isinstance(os_user, str)
                                or (os_user and not OS_USER.fullmatch(os_user))):
        return Result.fail("invalid", "os-user must be a user name (lower-case letters, "
                                      "digits, '_' or '-', at most 32), or empty for none")
    if os_user == "root":
        return Result.fail("invalid", "os-user root would run the tenant's code with every "
                                      "right on the peers' hosts")
    rec = state.tenants.get(cmd.name)
    if rec is None:
        if len(state.tenants) >= MAX_TENANTS:
            return Result.fail("full", f"there are {MAX_TENANTS} tenants with quotas")
        rec = state.tenants[cmd.name] = TenantRecord(cmd.name)
    if cmd.slots is not None:
        rec.slots = cmd.slots
    if cmd.sessions is not None:
        rec.sessions = cmd.sessions
    if os_user is not None:
        rec.os_user = os_user
    rec.updated = cmd.time
    if rec.slots == 0 and rec.sessions == 0 and not rec.os_user:
        del state.tenants[cmd.name]  # no quota and no user left: nothing to keep
    return Result(True, cmd.name)


def os_user(state, tenant: Optional[str]) -> Optional[str]:
    """The OS user `tenant`'s work runs as (None: none set)."""
    rec = state.tenants.get(key(tenant))
    return (getattr(rec, "os_user", "") or None) if rec is not None else None


def sessions_held(state, tenant: Optional[str]) -> int:
    k = key(tenant)
    return sum(1 for s in state.sessions.values() if key(s.tenant) == k)


def session_refusal(state, tenant: Optional[str]) -> Optional[Result]:
    """A refusal when `tenant` holds its session quota already, else None."""
    rec = state.tenants.get(key(tenant))
    if rec is None or rec.sessions <= 0:
        return None
    held = sessions_held(state, tenant)
    if held < rec.sessions:
        return None
    return Result.fail("quota", f"tenant {key(tenant)} holds {held} sessions, its quota "
                                f"(jm tenant set {key(tenant)} --sessions N); close one first")


HANDLERS = {c.SetTenant: set_tenant}
