"""The SQL workers of a peer: one per engine that has SQL on it (its sessions, Livy
sessions and SQL jobs), each a child process holding Spark Connect sessions on that
engine only. The peer engine's (or `spark.remote`'s) worker logs to `sql-worker.log`, a
tenant's or a job's engine's to `sql-worker-<engine>.log`. A worker goes when its engine
is stopped.
"""
from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import Callable, Mapping, Optional

from jm.policy.jobs.runparams import TOKEN_ENV
from jm.runtime.confine import TENANT_CPU, TENANT_MEMORY
from jm.runtime.limits import from_conf as job_limits
from jm.runtime.sqlclient import SqlWorker

log = logging.getLogger("jm.sql")


class SqlWorkers:
    def __init__(self, conf, log_dir: str, guard: Callable[[str, int], None],
                 child_env: Mapping[str, str]) -> None:
        self.conf = conf
        self.log_dir = log_dir
        self.guard = guard
        self.child_env = child_env
        self.by_url: dict[str, SqlWorker] = {}

    def get(self, url: str, name: str = "peer", user: Optional[str] = None,
            token: Optional[str] = None, memory: int = 0, cpu: int = 0) -> SqlWorker:
        """The worker of the engine at `url` (made on first use, started on first call; as
        OS user `user`: the tenant's of a tenant's engine, with that engine's `token`,
        within the tenant's `memory` and `cpu`). It runs users' SQL: confined as a job
        process is (rlimits, oom_score_adj; a cgroup of its own for a tenant's bounds)."""
        worker = self.by_url.get(url)
        if worker is None:
            shared = name in ("peer", "remote")
            suffix = "" if shared else f"-{name}"
            worker = self.by_url[url] = SqlWorker(
                url, self.conf["sql-gateway.worker-threads"],
                os.path.join(self.log_dir, f"sql-worker{suffix}.log"),
                self.conf.executor.nice,
                on_start=lambda pid: self.guard(f"sql-worker{suffix}", pid),
                env_pass=self.conf.executor.env_pass,
                env_add=dict(self.child_env, **({TOKEN_ENV: token} if token else {})))
            # (it switches to `user` itself, after making its tenant's cgroup as root)
            worker.confine = dict(replace(job_limits(self.conf), user=user).to_dict(),
                                  **{TENANT_MEMORY: memory, TENANT_CPU: cpu})
        return worker

    def find(self, url: Optional[str]) -> Optional[SqlWorker]:
        return self.by_url.get(url) if url else None

    async def drop(self, url: str) -> None:
        """The engine at `url` is gone for good: its worker too."""
        worker = self.by_url.pop(url, None)
        if worker is not None:
            await worker.close()

    def values(self):
        return self.by_url.values()

    async def close(self) -> None:
        for worker in list(self.by_url.values()):
            await worker.close()
        self.by_url.clear()
