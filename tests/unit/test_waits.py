"""jm.cluster.waits.wait_event: what the service loops wait with instead of wait_for
(whose cancellation is lost on Python 3.11 when the event is set at that moment)."""
import asyncio

from jm.cluster.waits import wait_event


async def test_set_timeout_and_no_limit():
    ev = asyncio.Event()
    assert await wait_event(ev, 0.01) is False
    asyncio.get_running_loop().call_later(0.01, ev.set)
    assert await wait_event(ev, None) is True
    assert await wait_event(ev, 0) is True  # already set


async def test_a_loop_on_it_ends_when_cancelled_as_the_event_is_set():
    """The race that lost the cancellation: the task is cancelled in the same loop
    iteration as the event is set. Every round must end the loop."""
    for _ in range(200):
        ev = asyncio.Event()
        turns = []

        async def loop():
            while True:
                await wait_event(ev, 1.0)
                ev.clear()
                turns.append(1)
        task = asyncio.create_task(loop())
        await asyncio.sleep(0)  # it waits now
        ev.set()
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=2.0)
        assert done and task.cancelled(), "a cancelled loop ran on"
