"""A connect-mode job's engine, as its JobMaster holds it: acquired at the job's first
spawn (its tenant's engine, or its own at `share-level: job`, started as its tenant's OS
user), held until the JobMaster ends so that restarts find it warm, released then; and
what the engine's deaths mean for the job's attempts (jm/policy/engines.py decides)."""
from __future__ import annotations

import os
from typing import Any, Optional

from jm.policy.engines import EngineKey, engine_killer, oom_suspects, ran_out_of_memory
from jm.runtime.sparkjvm import log_tail
from raft.tenants import TenantRuntime


class JobEngine:
    def __init__(self, engines: Any, key: EngineKey, holder: str, runtime: TenantRuntime,
                 timeout: float) -> None:
        self.engines = engines    # jm/cluster/engines.py Engines
        self.key = key
        self.holder = holder      # unique per JobMaster (job and epoch)
        self.runtime = runtime    # its tenant's OS user, its engines' memory and CPU
        self.timeout = timeout    # spark.connect.startup-timeout: the longest wait for one
        self.server: Any = None   # the engine once acquired (url, ready_file, generation)
        self.kills = 0            # its deaths in a row at which the job's statement ran
        self.lost: dict[int, dict] = {}  # restart -> the failure its engine's death made
        self.spawned_in = 0       # the engine's generation its last attempt started in
        self.died_since = False   # its engine died since its last attempt started

    async def acquire(self) -> Any:
        """The engine, once (it may wait while the peer's engines are all in use: NoEngine
        after the timeout)."""
        if self.server is None:
            self.server = await self.engines.acquire(self.key, self.holder, self.timeout,
                                                     self.runtime)
        return self.server

    def note_spawn(self) -> None:
        self.spawned_in = getattr(self.server, "generation", 0)
        self.died_since = False

    def restarted(self) -> bool:
        """Whether its engine's JVM is another one than its last attempt started in (what
        that attempt left running in the engine is gone with the old one)."""
        return self.died_since or getattr(self.server, "generation", 0) != self.spawned_in

    def release(self) -> None:
        self.server = None
        self.engines.release(self.key, self.holder)

    def died(self, restart: int, why: str, culprit: bool) -> str:
        """The engine died under attempt `restart`: its failure, and whether its restart
        strategy still decides (a job that keeps taking its engine down is hopeless)."""
        self.kills = self.kills + 1 if culprit else 0
        self.died_since = True
        failure = {"exception": why + ("; this job's statement was running when it ran out "
                                       "of memory" if culprit else "")}
        hopeless = engine_killer(self.kills)
        if hopeless:
            failure["hopeless"] = hopeless
        self.lost[restart] = failure
        return failure["exception"]

    def failure(self, restart: int, read: dict, session_id: Optional[str] = None) -> dict:
        """The failure of attempt `restart` as read from the job (`read`), or its engine's
        death when that is what ended it (what the job saw of it kept as the detail). An
        attempt whose statement ran its engine out of memory often fails before the JVM
        exits: its session named at the OutOfMemoryError in the engine's log says so.
        Blocking (it may read the log): in a thread."""
        lost = self.lost.pop(restart, None)
        if lost is None and session_id and getattr(self.server, "log_dir", None):
            tail = log_tail(os.path.join(self.server.log_dir, "spark-connect.log"))
            if session_id in oom_suspects(tail):
                self.died(restart, ran_out_of_memory(self.key.name, tail), True)
                lost = self.lost.pop(restart)
        if lost is None:
            return read
        detail = f"{read.get('exception', '')}\n{read.get('traceback', '')}".strip()
        return dict(read, **lost, traceback=detail)
