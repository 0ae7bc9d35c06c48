"""Dispatcher: reconciles the replicated assignment table with this peer's JobMasters.

Jobs assigned here (at their current epoch) get a JobMaster; JobMasters whose job is
no longer assigned here at that epoch (moved, fenced) are stopped; every JobMaster is
told its job's pending requests (cancel, stop-with-savepoint, savepoints, a planned move).
"""
from __future__ import annotations

import asyncio
from typing import NamedTuple, Optional
import logging
from dataclasses import dataclass

from raft import state as S, tenants
from raft.jobspec import JobSpec
from jm.cluster.jobs.jobservices import JobEnv
from jm.cluster.jobs.jobmaster import JobMaster
from jm.policy.jobs.intents import Intents
from jm.policy.spark.enginedeath import OomSuspects
from jm.policy.spark.engines import EngineKey

log = logging.getLogger("jm.cluster.dispatcher")


@dataclass(frozen=True)
class Placement:
    """A job assigned here, as the replicated state has it."""
    epoch: int
    intents: Intents
    spec: JobSpec
    losses: tuple = ()  # S.PeerLoss: its last attempts that lost their peer as they started
    tenant: Optional[str] = None  # whose job (its engine at share-level tenant)
    runtime: tenants.TenantRuntime = tenants.NO_RUNTIME  # its tenant's OS user, engines


class Seen(NamedTuple):
    """A job assigned here whose JobMaster runs at this epoch: its intents."""
    epoch: int
    intents: Intents


class Dispatcher:
    def __init__(self, raft, env: JobEnv) -> None:
        self.raft = raft
        self.env = env
        self.node = env.node
        self.masters: dict[str, JobMaster] = {}
        self._done: set[tuple[str, int]] = set()  # (job, epoch) whose JobMaster ended
        self._wake = raft.subscribe()
        self._task = None
        self._lock = asyncio.Lock()  # reconcile and fence never interleave
        # no job runs before this incarnation of the peer is registered and holds a lease:
        # a restarted peer must not run the assignments it replays from its journal
        self.fenced = True

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def _loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.reconcile()
            except Exception:
                log.exception("reconcile failed")

    def _mine(self) -> dict[str, "Placement | Seen"]:
        """The jobs assigned here: a job with its JobMaster at its epoch as Seen (what
        may change: its intents), any other as its whole Placement (read every time the
        state changes, for every job here: the first is cheap)."""
        with self.raft.read() as st:
            out: dict[str, Placement | Seen] = {}
            for job_id in st.jobs_of(self.node):
                job = st.jobs[job_id]
                if job.status in S.TERMINAL:
                    continue
                jm = self.masters.get(job_id)
                if jm is not None and jm.epoch == job.epoch:
                    out[job_id] = Seen(job.epoch, Intents.of(job))
                else:
                    out[job_id] = Placement(job.epoch, Intents.of(job), job.spec,
                                            S.peer_losses(job.attempts), job.tenant,
                                            tenants.runtime(st, job.tenant))
            return out

    async def reconcile(self) -> None:
        async with self._lock:
            await self._reconcile()

    async def _reconcile(self) -> None:
        mine = {} if self.fenced else self._mine()
        for job_id, jm in list(self.masters.items()):
            want = mine.get(job_id)
            if want is None or want.epoch != jm.epoch:
                log.info("job %s epoch %d is no longer assigned here; stopping it",
                         job_id, jm.epoch)
                self.masters.pop(job_id, None)
                await jm.stop()
            elif jm.task is not None and jm.task.done():
                self.masters.pop(job_id, None)
                self._done.add((job_id, jm.epoch))
            else:
                jm.update(want.intents)
        self._done = {k for k in self._done if k[0] in mine and mine[k[0]].epoch == k[1]}
        for job_id, p in mine.items():
            if job_id in self.masters or (job_id, p.epoch) in self._done:
                continue
            if not isinstance(p, Placement):  # (not met: a job read as Seen had its
                self._wake.set()              # JobMaster here, kept or moved to _done;
                continue                      # if ever, the next reconcile reads it whole)
            jm = JobMaster(self.env, job_id, p.epoch, p.spec, p.losses, p.tenant, p.runtime)
            jm.update(p.intents)
            self.masters[job_id] = jm
            task = jm.start()
            task.add_done_callback(lambda _t: self._wake.set())

    async def fence(self) -> None:
        """Lease lost: stop every job process now and start none until unfenced."""
        self.fenced = True
        async with self._lock:
            await self.stop_all()

    def unfence(self) -> None:
        if self.fenced:
            self.fenced = False
            self._wake.set()

    def note_engine_info(self, key: EngineKey, info: dict) -> None:
        """An engine's application changed or started or stopped waiting for executors:
        the connect-mode jobs on it say so."""
        for master in list(self.masters.values()):
            if master.engine_key == key:
                master.note_server(info)

    def lose_engine(self, key: EngineKey, why: str, suspects: OomSuspects) -> None:
        """An engine's JVM died: the jobs on it (and only those) lose their attempt; those
        whose work ran it out of memory are told so (jm/cluster/jobs/jobengine.py)."""
        for master in list(self.masters.values()):
            if master.engine_key == key:
                master.lose_engine(why, suspects)

    async def stop_all(self) -> None:
        masters, self.masters = list(self.masters.values()), {}
        await asyncio.gather(*(jm.stop() for jm in masters), return_exceptions=True)

    async def close(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.stop_all()
