"""Where a peer's job submissions go: into the leader's group commit, from any peer.

On the leader a submission joins its submitter's batch (jm/cluster/batcher.py). A
follower relays it to the leader over the Raft connections (raft/relay.py), where it
joins the same batch as the leader's own clients' and the other followers': one Raft
entry a round for the whole cluster instead of one for each peer, each holding three
times the jobs (3 peers, 64 clients: ~21 jobs an entry instead of ~10.5; docs/benchmarks.md,
session 42). The follower answers once its own replica has applied the entry that holds
the job, with that job's own Result, as it did when it wrote its own batch: what its
client reads next on it sees the job.

A relayed submission whose entry is not applied here within the write timeout is
RaftUnavailable (its outcome unknown, as for any write not committed in time; a client
retries with its X-Request-Id). A cluster with a peer of an older build (its protocol
below raft.protocol.RELAY) writes a follower's batch itself, as before.
"""
from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Optional

from raft import protocol
from raft.commands import SubmitJob, SubmitJobs, decode, encode
from raft.node import RaftUnavailable
from raft.state import Result

if TYPE_CHECKING:
    from jm.cluster.batcher import Batcher
    from raft.node import RaftHost

log = logging.getLogger("jm.cluster.submitroute")

# The submitter's batches (the leader's, the cluster's with the relay): after a batch of
# at least GATHER_AFTER jobs, the next one waits GATHER s for more (a caller alone, or a
# few in turn, are not held). 3 peers, 64 clients: ~31 jobs an entry instead of ~21 and
# 2,676 against 2,435 accepted/s (medians of 10 interleaved loads; docs/benchmarks.md,
# session 43); 12 ms gathered more but left cores idle (the clients wait longer).
GATHER, GATHER_AFTER = 0.005, 8


class SubmitRoute:
    """`await submit(job)` -> the job's Result, once applied on this peer."""

    def __init__(self, raft: "RaftHost", batcher: "Batcher", timeout: float) -> None:
        self.raft, self.batcher, self.timeout = raft, batcher, timeout
        self._waiting: dict[str, asyncio.Future] = {}  # relayed: job id -> its caller's
        # the relayed callers' deadlines in the order they came (one timeout: in time
        # order too), failed by one timer rather than an asyncio.timeout each
        self._deadlines: deque[tuple[float, asyncio.Future]] = deque()
        self._timer: Optional[asyncio.TimerHandle] = None
        raft.relay.sink = self._relayed_in
        raft.apply_hooks.append(self._applied)

    async def submit(self, job: SubmitJob) -> Result:
        if self.raft.is_leader() or self.raft.protocol() < protocol.RELAY:
            return await self.batcher.submit(job)
        return await self._relay(job)

    async def _relay(self, job: SubmitJob) -> Result:
        why = protocol.refusal(job, self.raft.protocol())
        if why is not None:
            return Result.fail("protocol", why)
        try:
            blob = encode(job)
        except Exception as bad:  # e.g. a lone surrogate: refused here, nothing sent
            return Result.fail("invalid", f"cannot be stored: {bad}")
        if self.raft.leader() is None:
            raise RaftUnavailable("no Raft leader at the moment")
        loop = asyncio.get_running_loop()
        start, fut = loop.time(), loop.create_future()
        self._waiting[job.job_id] = fut
        self._deadlines.append((start + self.timeout, fut))
        if self._timer is None:
            self._timer = loop.call_at(start + self.timeout, self._expire)
        try:
            self.raft.relay.send(job.job_id, blob, time.monotonic() + self.timeout)
            result = await fut
        finally:
            fut.cancel()  # (answered: nothing; a caller gone: nothing left to fail later)
            self._waiting.pop(job.job_id, None)
            self.raft.relay.forget(job.job_id)
            waiting = self._deadlines  # (the answered ones in front: gone, not kept until due)
            while waiting and waiting[0][1].done():
                waiting.popleft()
        self.raft.observe_write(job, loop.time() - start, False)
        return result

    def _expire(self) -> None:
        """(Event loop) relayed callers still waiting at their deadline: their write's
        outcome is unknown (RaftUnavailable); then the timer for the next deadline."""
        loop = asyncio.get_running_loop()
        now, waiting = loop.time(), self._deadlines
        while waiting and (waiting[0][0] <= now or waiting[0][1].done()):
            _, fut = waiting.popleft()
            if not fut.done():
                fut.set_exception(RaftUnavailable("the write was not committed in time; "
                                                  "its outcome is unknown"))
        self._timer = loop.call_at(waiting[0][0], self._expire) if waiting else None

    def _applied(self, command: Any, result: Result) -> None:
        """(Tick thread) an entry applied on this peer: the relayed jobs it holds are
        answered with their own Results."""
        if type(command) is not SubmitJobs or not self._waiting:
            return
        results = result.value if result.ok and isinstance(result.value, list) \
            else [result] * len(command.jobs)
        answers = [(fut, res) for job, res in zip(command.jobs, results)
                   if (fut := self._waiting.get(getattr(job, "job_id", None))) is not None]
        if answers:  # (one hand-over to the loop for the entry's jobs)
            self.raft.loop.call_soon_threadsafe(_settle, answers)

    def _relayed_in(self, blobs: list[bytes]) -> None:
        """(Event loop, the leader) jobs relayed by a follower join this peer's batch;
        their outcome reaches the follower through the log, not from here."""
        if not self.raft.is_leader():  # (lost the lead meanwhile: the senders send again)
            return
        for blob in blobs:
            try:
                job = decode(blob)
            except ValueError as exc:
                log.warning("a relayed submission is not a command: %s", exc)
                continue
            if type(job) is not SubmitJob:
                log.warning("a relayed %s refused: only submissions are relayed",
                            type(job).__name__)
                continue
            self.batcher.offer(job, blob)


def _settle(answers: list[tuple[asyncio.Future, Result]]) -> None:
    for fut, result in answers:
        if not fut.done():
            fut.set_result(result)
