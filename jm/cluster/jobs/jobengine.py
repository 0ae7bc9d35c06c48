"""A connect-mode job's engine, as its JobMaster holds it: acquired at the job's first
spawn (its tenant's engine, or its own at `share-level: job`, started as its tenant's OS
user), held until the JobMaster ends so that restarts find it warm, released then; and
what the engine's deaths mean for the job's attempts (jm/policy/spark/engines.py decides)."""
from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Optional

from jm.policy.spark.enginedeath import (DEATH_LOG, OomSuspects, engine_killer, oom_suspects,
                                         ran_out_of_memory)
from jm.policy.spark.engines import EngineKey
from jm.runtime.sparkjvm import log_tail
from raft.tenants import TenantRuntime


class JobEngine:
    def __init__(self, engines: Any, key: EngineKey, holder: str, runtime: TenantRuntime,
                 timeout: float) -> None:
        self.engines = engines    # jm/cluster/spark/engines.py Engines
        self.key = key
        self.holder = holder      # unique per JobMaster (job and epoch)
        self.runtime = runtime    # its tenant's OS user, its engines' memory and CPU
        self.timeout = timeout    # spark.connect.startup-timeout: the longest wait for one
        self.server: Any = None   # the engine once acquired (url, ready_file, generation)
        self.kills = 0            # its engine's deaths in a row that its work caused
        # restart -> its engine's death under that attempt: why, and whose work was running
        self.lost: dict[int, tuple[str, OomSuspects]] = {}
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

    def died(self, restart: int, why: str, suspects: OomSuspects) -> None:
        """The engine died under attempt `restart` (`why`, with `suspects` running when it
        ran out of memory): the attempt's failure says so once it is read."""
        self.died_since = True
        self.lost[restart] = (why, suspects)

    def failure(self, restart: int, read: dict, session_id: Optional[str] = None,
                query_ids: Callable[[], Iterable[str]] = frozenset) -> dict:
        """The failure of attempt `restart` as read from the job (`read`), or its engine's
        death when that is what ended it (what the job saw of it kept as the detail);
        whether its work (a statement of its session `session_id`, a micro-batch of one of
        its streaming queries `query_ids()`) is what ran the engine out of memory, and
        whether its restart strategy still decides (a job that keeps taking its engine
        down is hopeless). An attempt whose work ran its engine out of memory often fails
        before the JVM exits: the engine's log says so then. Blocking (it reads the log
        and the job's checkpoints): in a thread."""
        lost = self.lost.pop(restart, None)
        if lost is None:
            if not getattr(self.server, "log_dir", None):
                return read
            tail = log_tail(os.path.join(self.server.log_dir, "spark-connect.log"), DEATH_LOG)
            run = self.spawned_in or None  # (the JVM its attempt ran in: a new one may run)
            blame = oom_suspects(tail, generation=run).blame(session_id, query_ids())
            if blame is None:
                return read
            why = ran_out_of_memory(self.key.name, tail, run)
        else:
            why, suspects = lost
            blame = suspects.blame(session_id, query_ids()) if suspects else None
        self.kills = self.kills + 1 if blame else 0
        failure = {"exception": why + (f"; {blame}" if blame else "")}
        hopeless = engine_killer(self.kills)
        if hopeless:
            failure["hopeless"] = hopeless
        detail = f"{read.get('exception', '')}\n{read.get('traceback', '')}".strip()
        return dict(read, **failure, traceback=detail)
