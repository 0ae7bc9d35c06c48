"""How late this peer's event loop runs: its lag, exported as the histogram
`jm_event_loop_lag_seconds`, and every stall over `stall` seconds logged with what ran.

The loop side wakes every `interval` and measures how late it woke (the lag a lease
renewal, a REST request or a JobMaster would have waited). A watchdog thread looks at the
loop's last wake-up; once the loop is late by more than `stall`, it takes the loop
thread's stack (the code that holds the loop, seen while it runs), and the loop, when it
runs again, logs the stall's length with that stack."""
from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
import traceback
from typing import Callable, Optional

log = logging.getLogger("jm.looplag")

INTERVAL = 0.1   # s between two measurements
STALL = 0.1      # s of lag logged as a stall


def late_by(now: float, beat: float, interval: float) -> float:
    """How late the loop is at `now`, its last wake-up at `beat` for a sleep of `interval`."""
    return max(0.0, now - beat - interval)


class LoopMonitor:
    def __init__(self, observe: Callable[[float], None], interval: float = INTERVAL,
                 stall: float = STALL, clock: Callable[[], float] = time.monotonic) -> None:
        self.observe = observe
        self.interval, self.stall = interval, stall
        self.clock = clock
        self.beat = clock()
        self.worst = 0.0
        self._stack: Optional[str] = None   # what ran, taken by the watchdog
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._loop_thread = threading.get_ident()

    async def run(self) -> None:
        """The loop side (a task for the peer's lifetime); starts and stops the watchdog."""
        self._loop_thread = threading.get_ident()
        self.beat = self.clock()
        self._thread = threading.Thread(target=self._watch, name="loop-watchdog", daemon=True)
        self._thread.start()
        try:
            while True:
                await asyncio.sleep(self.interval)
                now = self.clock()
                lag = late_by(now, self.beat, self.interval)
                self.beat = now
                self.observe(lag)
                self.worst = max(self.worst, lag)
                if lag > self.stall:
                    stack, self._stack = self._stack, None
                    log.warning("event loop stalled for %.0f ms; it was running:\n%s",
                                lag * 1000, stack or "  (not caught in the act)")
        finally:
            self._stop.set()
            self._thread.join(timeout=1.0)

    def _watch(self) -> None:
        """The watchdog thread: catch the loop's stack while it is stalled (once a stall)."""
        seen = None
        while not self._stop.wait(self.stall):
            beat = self.beat
            if beat == seen or late_by(self.clock(), beat, self.interval) <= self.stall:
                continue
            frame = sys._current_frames().get(self._loop_thread)
            if frame is not None:
                self._stack = "".join(traceback.format_stack(frame, limit=8))
            seen = beat
