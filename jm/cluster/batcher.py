"""Group commit: many small writes from concurrent tasks of one peer become one Raft
command. Each caller still gets its own Result, once the batch is applied here.

A batch is bounded in items (`max_batch`) and in bytes (`max_bytes`, the items' encoded
size): pysyncobj applies a command on its one tick thread, so a batch of 500 large specs
would hold every peer's Raft for as long as it takes. An item is encoded once, when it is
queued (one that cannot be encoded is refused there, alone), and its batch is made of
those bytes (raft.commands.Packed), not encoded again."""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Optional

from jm.cluster.waits import wait_event
from raft import protocol
from raft.commands import Packed, encode
from raft.node import RaftUnavailable
from raft.state import Result

log = logging.getLogger("jm.cluster.batcher")


MAX_BATCH_BYTES = 1024 * 1024  # a batch holds items up to this many encoded bytes


class Batcher:
    """`await submit(item)` -> that item's Result. `wrap(items)` builds the batch command,
    whose Result.value is the list of per-item Results. With `retry`, a batch that could
    not be committed is retried (status reports must land); without it, the callers get
    RaftUnavailable (a REST client can retry with its request id)."""

    def __init__(self, raft, wrap: Callable[[tuple], Any], timeout: float, retry: bool,
                 max_batch: int = 500, max_bytes: int = MAX_BATCH_BYTES,
                 linger: float = 0.0, gather: float = 0.0, gather_after: int = 0) -> None:
        """`linger`: after the first item of a batch, wait this long for more (one
        command per `linger` however many callers: the leader's lease rounds); an
        urgent item (`submit(item, urgent=True)`) cuts the wait short. `gather`: the
        same wait only while busy, when the batch before ended less than `gather` ago
        and held at least `gather_after` items (at rest, or with a caller or a few in
        turn, an item goes at once; under load the commands carry more items each)."""
        self.raft = raft
        self.wrap = wrap
        self.timeout = timeout
        self.retry = retry
        self.max_batch = max_batch
        self.max_bytes = max_bytes
        self.linger = linger
        self.gather = gather
        self.gather_after = gather_after
        self._last = 0  # items in the last batch
        self._ended = -float("inf")  # (loop time) when the last batch's commit returned
        self._urgent = asyncio.Event()
        self._queue: list[tuple[Any, asyncio.Future]] = []
        self._blobs: dict[int, bytes] = {}  # id(future) -> the item encoded
        self._wake = asyncio.Event()
        self._task: Optional[asyncio.Task] = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def submit(self, item: Any, urgent: bool = False) -> Result:
        why = protocol.refusal(item, self.raft.protocol())  # (refused alone, not its batch)
        if why is not None:
            return Result.fail("protocol", why)
        try:
            blob = encode(item)
        except Exception as bad:  # e.g. a lone surrogate: refused alone, nothing queued
            return Result.fail("invalid", f"cannot be stored: {bad}")
        return await self._queued(item, blob, urgent)

    def offer(self, item: Any, blob: bytes) -> None:
        """An item whose caller waits elsewhere (a submission another peer relayed: it
        learns the outcome by applying the entry): batched as any other, its Result
        dropped here. `blob`: the item encoded (`encode(item)`)."""
        if protocol.refusal(item, self.raft.protocol()) is None:
            self._queued(item, blob, False).add_done_callback(_unheard)

    def _queued(self, item: Any, blob: bytes, urgent: bool) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self._blobs[id(fut)] = blob
        fut.add_done_callback(lambda f: self._blobs.pop(id(f), None))
        self._queue.append((item, fut))
        if urgent:
            self._urgent.set()
        self._wake.set()
        return fut

    def _take(self) -> list[tuple[Any, asyncio.Future]]:
        """The next batch: up to max_batch items and max_bytes bytes (at least one item)."""
        total, n = 0, 0
        for _, fut in self._queue[:self.max_batch]:
            size = len(self._blobs.get(id(fut), b""))
            if n and total + size > self.max_bytes:
                break
            total += size
            n += 1
        batch, self._queue = self._queue[:n], self._queue[n:]
        return batch

    async def _loop(self) -> None:
        backoff = 0.05
        while True:
            await self._wake.wait()
            now = asyncio.get_running_loop().time()
            busy = now - self._ended < self.gather and self._last >= self.gather_after
            wait = self.linger or (self.gather if busy else 0.0)
            if wait:  # gather the batch, unless an urgent item is waiting
                await wait_event(self._urgent, wait)
                self._urgent.clear()
            self._wake.clear()
            batch = self._take()
            if self._queue:
                self._wake.set()
            if not batch:
                continue
            self._last = len(batch)
            try:
                try:
                    res = await self.raft.submit(self._command(batch), self.timeout)
                finally:
                    self._ended = asyncio.get_running_loop().time()
                backoff = 0.05
            except RaftUnavailable as exc:
                if self.retry:
                    log.warning("batch of %d not committed (%s); retrying", len(batch), exc)
                    self._queue = batch + self._queue
                    await asyncio.sleep(backoff)  # pacing while there is no leader
                    backoff = min(1.0, backoff * 2)
                    self._wake.set()
                else:
                    for _, fut in batch:
                        if not fut.done():
                            fut.set_exception(RaftUnavailable(str(exc)))
                continue
            except Exception as exc:  # (every item was encoded when queued: not one of them)
                for _, fut in batch:
                    if not fut.done():
                        fut.set_result(Result.fail("invalid", f"{type(exc).__name__}: {exc}"))
                continue
            results = res.value if res.ok and isinstance(res.value, list) else [res] * len(batch)
            for (_, fut), r in zip(batch, results):
                if not fut.done():
                    fut.set_result(r)

    def _command(self, batch: list[tuple[Any, asyncio.Future]]) -> Any:
        """The batch command, of its items as they were encoded when queued."""
        blobs = self._blobs
        return self.wrap(tuple(Packed(blobs[id(fut)]) if id(fut) in blobs else item
                               for item, fut in batch))

    async def close(self) -> None:
        if self._task:
            self._task.cancel()
        for _, fut in self._queue:
            if not fut.done():
                fut.cancel()
        self._queue = []


def _unheard(fut: asyncio.Future) -> None:
    """An offered item's outcome, which nobody awaits: read, so that asyncio does not
    report a failure (a batch not committed in time) as never retrieved."""
    if not fut.cancelled():
        fut.exception()
