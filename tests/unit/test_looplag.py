"""Unit tests for jm/cluster/looplag.py on a real event loop: a stall is measured, exported
and logged with the code that held the loop."""
from __future__ import annotations

import asyncio
import logging
import time

from jm.cluster.looplag import LoopMonitor, late_by


def test_late_by():
    assert abs(late_by(10.35, 10.0, 0.1) - 0.25) < 1e-9
    assert late_by(10.05, 10.0, 0.1) == 0.0


def hold_the_loop_for(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:  # busy, like a long serialisation on the loop
        pass


def test_a_stall_is_observed_and_logged_with_what_ran(caplog):
    seen = []
    mon = LoopMonitor(seen.append, interval=0.02, stall=0.1)

    async def main():
        task = asyncio.create_task(mon.run())
        deadline = time.monotonic() + 10
        while len(seen) < 3 and time.monotonic() < deadline:  # running, no stall yet
            await asyncio.sleep(0.01)
        hold_the_loop_for(0.4)
        while mon.worst < 0.3 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return task

    with caplog.at_level(logging.WARNING, logger="jm.looplag"):
        asyncio.run(main())
    assert max(seen) >= 0.3 and mon.worst == max(seen)
    stalls = [r.getMessage() for r in caplog.records if "stalled" in r.getMessage()]
    # (on a busy machine the loop may also be late now and then before or after the hold)
    assert any("hold_the_loop_for" in s for s in stalls), stalls
    assert not mon._thread.is_alive()  # the watchdog stops with the task
