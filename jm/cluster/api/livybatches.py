"""Apache Livy's batches (rest/livy.py's /batches): a batch is a script job
(jm/wire/livy.py makes its spec), numbered in the replicated state; its log is its job's."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

from jm.api import ANYONE, ApiError, Credential
from jm.wire import livy

if TYPE_CHECKING:
    from jm.cluster.api.jobwrites import JobWrites
    from jm.cluster.api.reads import JobViews
    from raft.node import RaftHost


class LivyBatches:
    def __init__(self, raft: "RaftHost", jobs: "JobWrites", views: "JobViews") -> None:
        self.raft, self.jobs, self.views = raft, jobs, views

    async def submit(self, body: Any, request_id: str, who: Credential = ANYONE
                     ) -> dict:
        """POST /batches: a Livy batch request as a script job (jm/wire/livy.py)."""
        try:
            spec = livy.batch_spec(body)
        except ValueError as exc:
            raise ApiError(400, *exc.args[0])
        out = await self.jobs.submit(spec, request_id, livy.FIELD_NAMES, who)
        with self.raft.read() as st:
            job = st.jobs.get(out["jobid"])
            if job is None:  # applied here before the answer: never; purged at once: gone
                raise ApiError(404, f"batch of job {out['jobid']} is gone already")
            return livy.batch(job)

    def version(self) -> dict:
        return {"version": livy.VERSION, "gitCommit": "", "user": "", "url": "",
                "branch": "", "date": ""}

    def list(self, start: int, size: int, who: Credential = ANYONE) -> dict:
        with self.raft.read() as st:
            return livy.batches([j for j in st.jobs.values() if who.may_see(j.tenant)],
                                start, size)

    def get(self, number: int) -> Optional[tuple[str, dict]]:
        """The batch with this number: (its job's id, the batch), or None."""
        with self.raft.read() as st:
            job = st.jobs.get(st.by_number.get(number, ""))
            return (job.id, livy.batch(job)) if job is not None else None

    async def log(self, job_id: str, start: Optional[int], size: Optional[int]) -> dict:
        """A batch's log lines, Livy's way (the last 100 by default)."""
        try:
            text = (await self.views.job_logs(job_id, None, 0, None, False)).get("text") or ""
        except ApiError as exc:
            if exc.status != 404:  # 404: it has not run yet, no log
                raise
            text = ""
        first, total, lines = livy.log_page(text, start, size)
        return {"from": first, "total": total, "log": lines}

