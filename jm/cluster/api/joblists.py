"""The list routes' reads from this peer's replica: pages of jobs (`GET /jobs`), Flink's
complete overview (`GET /jobs/overview`, `/v1/jobs/overview`, from the row cache of
jm/cluster/api/readcache.py), and pages of the short lists (peers, artifacts)."""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, ContextManager, Mapping, Optional

from jm.cluster.api.readcache import OverviewCache
from jm.policy.api import pages
from jm.wire import views
from raft.commands import CancelJob, ReportStatuses
from raft.records import TERMINAL
from jm.api import ApiError

log = logging.getLogger("jm.cluster.joblists")


def parse(query: Mapping[str, str], default_limit: Optional[int] = pages.DEFAULT_LIMIT,
          jobs: bool = True) -> pages.PageQuery:
    """The page a request asks for (400 when a parameter is out of range)."""
    try:
        return pages.parse(query, default_limit, jobs)
    except pages.BadQuery as exc:
        raise ApiError(400, str(exc))


WARM_AFTER = 500  # jobs ended since the last fill of the overview's cache: fill it again


def jobs_ended(command: Any, result: Any) -> int:
    """How many jobs an applied command ended (status reports and cancels; pure)."""
    if isinstance(command, ReportStatuses) and result.ok and isinstance(result.value, list):
        return sum(1 for rep, r in zip(command.reports, result.value)
                   if r.ok and rep.status in TERMINAL)
    if isinstance(command, CancelJob) and result.ok and result.value in TERMINAL:
        return 1
    return 0


class JobLists:
    """`read`: the replica's read lock (a context manager yielding the ClusterState)."""

    def __init__(self, read: Callable[[], ContextManager[Any]],
                 clock: Callable[[], float] = time.time) -> None:
        self.read = read
        self.clock = clock
        self.cache = OverviewCache()
        self._ended = 0  # jobs ended since the cache was last filled (note_applied)

    def jobs_page(self, query: Mapping[str, str], tenant: Optional[str] = None) -> dict:
        """A page of jobs, newest first: Flink's `/jobs` fields (`id`, `status`) and the
        overview's row of each; `tenant`: only that tenant's jobs (None: every job)."""
        q = parse(query)
        now = self.clock()
        with self.read() as st:
            if q.filtered or tenant is not None:
                def keep(j: Any) -> bool:
                    return (tenant is None or j.tenant == tenant) and \
                        pages.job_matches(q, j, views.last_modification)
            else:
                def keep(j: Any) -> bool:
                    return True
            found, total = pages.page_of(q, reversed(st.jobs.values()), keep,
                                         None if q.filtered or tenant is not None
                                         else len(st.jobs))
            rows = [{"id": j.id, "status": j.status, **views.job_row(j, now)}
                    for j in found]
        return pages.envelope(q, "jobs", rows, total)

    async def overview(self, query: Mapping[str, str],
                       id_ok: Optional[Callable[[str], bool]] = None,
                       tenant: Optional[str] = None) -> list[bytes]:
        """Flink's MultipleJobsDetails (`{"jobs": [...]}`, submission order) as JSON blocks:
        every job unless the query filters or pages; `id_ok` narrows it by job id,
        `tenant` to that tenant's jobs."""
        q = parse(query, None)
        if not (q.filtered or id_ok is not None or q.limit is not None or q.offset
                or tenant is not None):
            return await self.cache.body(self.read, self.clock(), None)

        def keep(j: Any) -> bool:
            return (id_ok is None or bool(id_ok(j.id))) and \
                (tenant is None or j.tenant == tenant) and \
                pages.job_matches(q, j, views.last_modification)

        def select(st: Any) -> list:
            return pages.page_of(q, st.jobs.values(), keep)[0]
        return await self.cache.body(self.read, self.clock(), select)

    def note_applied(self, command: Any, result: Any) -> bool:
        """Count the jobs a command ended (the replica's apply hook, any thread); True
        when enough ended since the last fill that the cache should be filled again (on
        every peer: the first poll of a peer nobody asked before is as quick as the
        next; the rows cost about 400 bytes an ended job)."""
        self._ended += jobs_ended(command, result)
        if self._ended < WARM_AFTER:
            return False
        self._ended = 0
        return True

    async def warm(self) -> None:
        """Fill the overview's row cache in the background (jobs ended, a snapshot
        installed), so that the next poll of the overview does not pay for it."""
        try:
            await self.cache.fill(self.read, self.clock())
        except Exception:  # a cache, never a reason to fail
            log.warning("warming the overview cache failed", exc_info=True)

    def page(self, query: Mapping[str, str], key: str, rows: list,
             default_limit: Optional[int] = None) -> dict:
        """A page of a short list (peers, artifacts), already built: sliced."""
        q = parse(query, default_limit, jobs=False)
        end = None if q.limit is None else q.offset + q.limit
        return pages.envelope(q, key, rows[q.offset:end], len(rows))
