"""Tenants' quotas in the replicated state (pure, like raft/state.py): `SetTenant` keeps
a tenant's slot and SQL-session quotas (0: no limit). The slot quota is kept by the
ResourceManager's placement (a job over it waits CREATED: jm/policy/members/quota.py); the
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
MAX_PROXIES = 64  # proxy users a tenant may be given
MAX_SAVEPOINT_DIRS = 16  # savepoint directories a tenant may be granted
MAX_DIR = 1024           # characters of one
MAX_QUOTA = 1_000_000
MIN_MEMORY = 256 * 1024 * 1024   # an engine (a JVM) below this cannot start
MAX_MEMORY = 1 << 40
MAX_CPU = 10_000                 # cgroup v2's cpu.weight range (1..10000; 100: the default)


@dataclass
class TenantRecord:
    name: str
    slots: int = 0      # slots its jobs may hold at once (0: no limit)
    sessions: int = 0   # SQL and Livy sessions it may hold open (0: no limit)
    updated: float = 0.0
    os_user: str = ""   # the OS user its work runs as on every peer ("": none)
    memory: int = 0     # bytes each of its engines may use (its cgroup; 0: no limit)
    cpu: int = 0        # CPU weight of each of its engines (0: the default, 100)
    proxy_users: tuple = ()  # the proxy users its work may run as (none: none)
    savepoint_dirs: tuple = ()  # where its savepoints may go besides state.savepoints.dir


@dataclass(frozen=True)
class TenantRuntime:
    """How a tenant's work runs on a peer: its OS user, its engines' memory and CPU."""
    os_user: Optional[str] = None
    memory: int = 0
    cpu: int = 0


NO_RUNTIME = TenantRuntime()


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
    memory, cpu = getattr(cmd, "memory", None), getattr(cmd, "cpu", None)
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, int) or not (
            memory == 0 or MIN_MEMORY <= memory <= MAX_MEMORY)):
        return Result.fail("invalid", f"memory must be 0 (no limit) or from "
                                      f"{MIN_MEMORY >> 20} MB to {MAX_MEMORY >> 30} GB")
    if cpu is not None and (isinstance(cpu, bool) or not isinstance(cpu, int)
                            or not 0 <= cpu <= MAX_CPU):
        return Result.fail("invalid", f"cpu is a weight from 1 to {MAX_CPU} (100: an "
                                      "engine's default share), or 0 for the default")
    proxies = getattr(cmd, "proxy_users", None)
    if proxies is not None and (not isinstance(proxies, tuple) or len(proxies) > MAX_PROXIES
                                or not all(isinstance(u, str) and OS_USER.fullmatch(u)
                                           and u != "root" for u in proxies)):
        return Result.fail("invalid", f"proxy-users must be at most {MAX_PROXIES} user names "
                                      "(lower-case letters, digits, '_' or '-'; not root)")
    dirs = getattr(cmd, "savepoint_dirs", None)
    if dirs is not None and (not isinstance(dirs, tuple) or len(dirs) > MAX_SAVEPOINT_DIRS
                             or not all(isinstance(d, str) and 1 < len(d) <= MAX_DIR
                                        and (d.startswith("/") or "://" in d) for d in dirs)):
        return Result.fail("invalid", f"savepoint-dirs must be at most {MAX_SAVEPOINT_DIRS} "
                                      f"absolute paths (not /) or URIs of at most "
                                      f"{MAX_DIR} characters")
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
    if memory is not None:
        rec.memory = memory
    if cpu is not None:
        rec.cpu = cpu
    if proxies is not None:
        rec.proxy_users = tuple(sorted(set(proxies)))
    if dirs is not None:
        rec.savepoint_dirs = tuple(sorted(set(dirs)))
    rec.updated = cmd.time
    if not (rec.slots or rec.sessions or rec.os_user or rec.memory or rec.cpu
            or rec.proxy_users or getattr(rec, "savepoint_dirs", ())):
        del state.tenants[cmd.name]  # no quota and no user left: nothing to keep
    return Result(True, cmd.name)


def os_user(state, tenant: Optional[str]) -> Optional[str]:
    """The OS user `tenant`'s work runs as (None: none set)."""
    return runtime(state, tenant).os_user


def runtime(state, tenant: Optional[str]) -> TenantRuntime:
    """How `tenant`'s work runs (its OS user, its engines' memory and CPU)."""
    rec = state.tenants.get(key(tenant))
    if rec is None:
        return NO_RUNTIME
    return TenantRuntime(getattr(rec, "os_user", "") or None, getattr(rec, "memory", 0),
                         getattr(rec, "cpu", 0))


def proxy_users(state, tenant: Optional[str]) -> tuple:
    """The proxy users `tenant`'s work may run as (set with PUT /tenants; none: none)."""
    rec = state.tenants.get(key(tenant))
    return tuple(getattr(rec, "proxy_users", ()) or ()) if rec is not None else ()


def savepoint_dirs(state, tenant: Optional[str]) -> tuple:
    """The savepoint directories granted `tenant` (PUT /tenants savepoint-dirs)."""
    rec = state.tenants.get(key(tenant))
    return tuple(getattr(rec, "savepoint_dirs", ()) or ()) if rec is not None else ()


def sessions_held(state, tenant: Optional[str]) -> int:
    k = key(tenant)
    return (sum(1 for s in state.sessions.values() if key(s.tenant) == k)
            + sum(1 for s in state.connect.values() if key(s.tenant) == k))


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
