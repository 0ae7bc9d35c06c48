"""What every role of a peer's REST gateway shares: the leader as this peer sees it, a
write through Raft answered as HTTP (`Writes`), and the applied index (the replica role
REST asks for X-JM-Index and X-JM-Min-Index). Failures leave as `ApiError`s with their
HTTP status: a bad spec is 400, no leader or an unknown outcome 503 with Retry-After."""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, Optional

from jm.api import ApiError
from jm.policy.jobs.spec import SpecError
from raft.node import RaftUnavailable

if TYPE_CHECKING:
    from jm.cluster.members.lease import Lease
    from raft.node import RaftHost


def api_errors(fn):
    """A gateway write's failures as HTTP errors: 400 for a bad spec, 503 (retry) when
    there is no leader or the write's outcome is unknown."""
    @functools.wraps(fn)
    async def wrapper(*args: Any, **kw: Any) -> Any:
        try:
            return await fn(*args, **kw)
        except SpecError as exc:  # 400, or 413 for a spec over its byte limit
            raise ApiError(exc.status, *exc.errors)
        except UnicodeEncodeError:  # e.g. "\udcff" in JSON: Raft stores UTF-8 text only
            raise ApiError(400, "the request holds text that is not valid Unicode (a lone "
                                "surrogate such as \\udcff); send UTF-8 text")
        except RaftUnavailable as exc:
            raise ApiError(503, str(exc), headers={"Retry-After": "1"})
    return wrapper


class Writes:
    """Raft commands for REST writes, and the replica's applied index."""

    def __init__(self, raft: "RaftHost", lease: "Lease", started: Callable[[], bool],
                 timeout: float) -> None:
        self.raft, self.lease, self.started = raft, lease, started
        self.timeout = timeout  # rest.write-timeout: how long a write may wait for Raft

    def leader(self) -> Optional[str]:
        """The Raft leader as far as this peer can tell. An isolated pysyncobj follower
        keeps naming its last leader (it starts no election while connected to nobody),
        so a peer whose lease has run out knows no leader."""
        if self.lease.term.expired():
            return None
        return self.raft.leader()

    def writable(self) -> None:
        if not self.started():  # REST is up before the peer's writers are
            raise RaftUnavailable("this peer is still starting; retry, or use another peer")
        if self.leader() is None:
            raise RaftUnavailable("no Raft leader reachable from this peer at the moment; "
                                  "retry, or use another peer")

    async def write(self, command: Any) -> Any:
        """One Raft command for a REST write; refusals become 404/409/400."""
        self.writable()
        res = await self.submit(command)
        if not res.ok:
            raise ApiError({"not-found": 404, "conflict": 409, "protocol": 409}
                           .get(res.code, 400), res.error)
        return res.value

    async def submit(self, command: Any) -> Any:
        """One Raft command, its outcome as the state machine gave it."""
        return await self.raft.submit(command, self.timeout)

    async def barrier(self) -> None:
        """Until everything committed before now is applied here."""
        await self.raft.barrier(self.timeout)

    def applied_index(self) -> int:
        return self.raft.applied_index()

    async def wait_applied(self, index: int, timeout: float) -> bool:
        return await self.raft.wait_applied(index, timeout)
