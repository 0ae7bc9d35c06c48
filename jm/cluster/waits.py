"""Waiting for an asyncio.Event with a timeout, without asyncio.wait_for.

On Python 3.11, `wait_for` returns the inner result when its task is cancelled at the
moment the awaited event is set: the cancellation is lost (CPython gh-86296, fixed in
3.12). A service loop around it then never ends, and a peer's stop waits for its
deadline (seen: the ResourceManager's loop, 20 s teardowns under load)."""
from __future__ import annotations

import asyncio
from typing import Optional


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
