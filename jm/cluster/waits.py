"""Waiting for an asyncio.Event with a timeout, without asyncio.wait_for; awaiting a step
of a stop for a bounded time; a blocking call in a thread of its own.

On Python 3.11, `wait_for` returns the inner result when its task is cancelled at the
moment the awaited event is set: the cancellation is lost (CPython gh-86296, fixed in
3.12). A service loop around it then never ends, and a peer's stop waits for its
deadline (seen: the ResourceManager's loop, 20 s teardowns under load)."""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any, Optional

log = logging.getLogger("jm.cluster.peer")


async def wait_event(event: asyncio.Event, timeout: Optional[float]) -> bool:
    """True once `event` is set, False after `timeout` seconds (None: no limit); a
    cancellation of the caller always propagates."""
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        done, _ = await asyncio.wait({waiter}, timeout=timeout)
    finally:
        waiter.cancel()
    return bool(done)


async def bounded(aw, deadline: float, what: str) -> None:
    """Await `aw` until the monotonic `deadline` (at least a moment); log what did not end.
    Unlike wait_for, it does not wait for a late step to honour its cancellation."""
    task = asyncio.ensure_future(aw)
    done, _ = await asyncio.wait({task}, timeout=max(0.05, deadline - time.monotonic()))
    if not done:
        task.cancel()
        log.error("%s: not done in time; going on", what)
    elif not task.cancelled() and task.exception() is not None:
        log.error("%s failed: %r", what, task.exception())


def in_thread(fn) -> asyncio.Future:
    """Run a blocking call in a daemon thread (never the loop's default executor, whose
    shutdown would wait for a call that hangs)."""
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def run() -> None:
        try:
            out, err = fn(), None
        except BaseException as exc:  # handed to the loop
            out, err = None, exc
        try:
            loop.call_soon_threadsafe(settle_future, fut, out, err)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass
    threading.Thread(target=run, name="jm-blocking", daemon=True).start()
    return fut


def settle_future(fut: asyncio.Future, out: Any, err: Optional[BaseException]) -> None:
    if fut.done():
        return
    if err is not None:
        fut.set_exception(err)
    else:
        fut.set_result(out)
