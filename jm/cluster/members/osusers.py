"""Which tenants' OS users this peer's host lacks: its heartbeat names those tenants
(`Heartbeat.lacks`), and placement keeps their jobs on peers whose host has the user
(jm/policy/members/placement.py). A job that no peer can run as its tenant's user is still
placed, and its attempt fails with UserNotFound naming the user, as on a single host.

A look-up reads the host's user database (NSS); a user's answer is kept for `ttl` s, so
a heartbeat costs a dict look-up, and a user added with `useradd` is seen within `ttl`."""
from __future__ import annotations

import time
from typing import Callable, Mapping

from jm.runtime.confine import user_uid

TTL = 10.0  # s a user's presence is believed


class MissingUsers:
    def __init__(self, users: Callable[[], Mapping[str, str]],
                 exists: Callable[[str], bool] = lambda u: user_uid(u) is not None,
                 clock: Callable[[], float] = time.monotonic, ttl: float = TTL) -> None:
        self.users = users      # tenant -> its os-user (the replicated tenants' records)
        self.exists = exists
        self.clock = clock
        self.ttl = ttl
        self._seen: dict[str, tuple[float, bool]] = {}  # user -> (when looked up, there)

    def has(self, user: str) -> bool:
        now = self.clock()
        seen = self._seen.get(user)
        if seen is None or now - seen[0] >= self.ttl:
            seen = self._seen[user] = (now, self.exists(user))
        return seen[1]

    def __call__(self) -> tuple:
        """The tenants (sorted) whose os-user this host has no account for."""
        users = self.users()
        for gone in set(self._seen) - set(users.values()):
            del self._seen[gone]
        return tuple(sorted(t for t, u in users.items() if u and not self.has(u)))


def tenant_users(state) -> dict[str, str]:
    """tenant -> os-user of every tenant that names one (a replica's state, read-locked
    by the caller)."""
    return {name: rec.os_user for name, rec in state.tenants.items()
            if getattr(rec, "os_user", "")}


def users_of(read: Callable) -> Callable[[], dict[str, str]]:
    """`tenant_users` of the replica behind `read` (raft.read())."""
    def users() -> dict[str, str]:
        with read() as st:
            return tenant_users(st)
    return users

