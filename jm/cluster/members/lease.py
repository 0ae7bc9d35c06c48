"""A peer's membership and lease: it registers, renews its lease with a heartbeat every
`heartbeat.interval`, and fences itself when no heartbeat was acknowledged for
`jobmanager.lease-timeout`.

Heartbeats are pipelined: the next one is sent on time even while earlier ones wait for
their commit (at most MAX_IN_FLIGHT), so one slow or lost commit (a leader that died
with it, a busy leader) does not hold the lease back by a whole round trip. The lease
runs from the *send* time of the newest acknowledged heartbeat.

Clocks: the lease, the heartbeat interval and the watchdog use this host's monotonic clock
only; no other host's time enters them. `Heartbeat.time` is this peer's wall clock, shown
in /nodes, and it is also what tells the state machine that the peer was heard from after
the leader decided to declare it dead (DeclarePeerDead carries the `last_heartbeat` it saw;
the state keeps the maximum). A wall clock stepped back would make new heartbeats carry
older times, leave `last_heartbeat` unchanged and let a stale declaration through, so the
stamps are made strictly increasing within this process (`stamp`)."""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Awaitable, Callable, Optional

from raft.commands import Heartbeat, RegisterPeer
from raft.node import RaftUnavailable
from raft.state import Result
from jm.cluster.waits import wait_event

log = logging.getLogger("jm.cluster.peer")

MAX_IN_FLIGHT = 4
NO_LEADER_RETRY = 0.1  # seconds between tries while the cluster elects a leader


class LeaseTerm:
    """Whether this peer holds its lease: what `Lease` renews, read by whatever may run
    only under it (JobMasters wait for it, SQL workers and REST writes check it). Made
    before the components that read it, and before the Lease, which needs some of them."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.lease_from: Optional[float] = None  # monotonic send time of the newest ack
        # the oldest this peer's lease ever got before a renewal (s): how close it came to
        # fencing (a leader change, a slow commit); jm_lease_age_max_seconds
        self.age_max = 0.0
        self.renewed = asyncio.Event()  # set at each renewal (wait_valid waits for one)

    def valid(self) -> bool:
        return (self.lease_from is not None and
                time.monotonic() - self.lease_from <= self.timeout)

    def expired(self) -> bool:
        """Held a lease once and it ran out (not: never registered)."""
        return self.lease_from is not None and not self.valid()

    async def wait_valid(self) -> None:
        """Return once this peer holds its lease (at once if it does)."""
        while not self.valid():
            self.renewed.clear()
            await self.renewed.wait()

    def renew(self, sent_mono: float) -> float:
        """A heartbeat sent at `sent_mono` was acknowledged: the lease's new end."""
        if self.lease_from is not None and sent_mono > self.lease_from:
            self.age_max = max(self.age_max, time.monotonic() - self.lease_from)
        self.lease_from = max(self.lease_from or 0.0, sent_mono)
        self.renewed.set()
        return self.lease_from + self.timeout

    def drop(self) -> None:
        """No lease (a new registration starts one)."""
        self.lease_from = None


class Lease:
    def __init__(self, raft, node: str, register: Callable[[], RegisterPeer],
                 heartbeat: Callable[[float], Heartbeat], interval: float, lease_timeout: float,
                 register_timeout: float, executor, dispatcher,
                 send: Optional[Callable[[Heartbeat, float, bool], Awaitable[Result]]] = None,
                 now: Optional[asyncio.Event] = None, term: Optional[LeaseTerm] = None) -> None:
        """`send(heartbeat, timeout, urgent)`: the heartbeat's Result once committed (the
        leader's lease round, jm/cluster/members/beats.py; urgent: this peer missed renewals, the
        leader should not wait to gather more); default: a Raft command of its own.
        `now`: set by whoever has a change to tell (Spark's readiness): a heartbeat goes
        at once. `term`: the lease it renews (default: one of its own)."""
        self.raft = raft
        self.send = send or (lambda hb, timeout, urgent: raft.submit(hb, timeout))
        self.node = node
        self.make_register = register
        self.make_heartbeat = heartbeat
        self.interval = interval
        self.register_timeout = register_timeout
        self.executor = executor
        self.dispatcher = dispatcher
        self.registered = asyncio.Event()
        self.refused = asyncio.Event()  # the cluster will never take this peer's build
        self.refusal = ""
        self.now = now or asyncio.Event()  # set: send a heartbeat at once
        self.term = term or LeaseTerm(lease_timeout)
        self.timeout = self.term.timeout
        self._incarnation = 0  # answers to heartbeats of an earlier registration are void
        self._fence_first = False  # declared dead: stop everything before registering again
        self._in_flight: set[asyncio.Task] = set()
        self._last_stamp = 0.0  # the newest Heartbeat.time sent by this process
        self._told: Optional[tuple] = None  # (ready, disk_low, lacks) of the last one told

    def stamp(self, wall: float) -> float:
        """A heartbeat's time: this host's wall clock, but always above the previous one
        (by a microsecond while the wall clock is behind, e.g. stepped back 30 s)."""
        self._last_stamp = max(wall, self._last_stamp + 1e-6)
        return self._last_stamp

    def _renew(self, sent_mono: float) -> None:
        self.executor.set_lease(self.term.renew(sent_mono))

    # ---- the loops ------------------------------------------------------------------------
    async def run(self) -> None:
        """Register, then send a heartbeat every interval (or at once when asked).
        Re-register if this peer was declared dead: it comes back empty."""
        try:
            while True:
                if not self.registered.is_set():
                    if self._fence_first:
                        try:
                            await self.dispatcher.fence()
                        except Exception:  # never let the lease loop die
                            log.exception("fencing this peer failed")
                        self._fence_first = False
                    retry = await self._register()
                    if retry is not None:
                        await asyncio.sleep(retry)
                        continue
                sent = time.monotonic()
                if len(self._in_flight) < MAX_IN_FLIGHT:
                    task = asyncio.create_task(self._beat(self._incarnation))
                    self._in_flight.add(task)
                    task.add_done_callback(self._in_flight.discard)
                self.now.clear()
                await wait_event(self.now,
                                 max(0.0, self.interval - (time.monotonic() - sent)))
        finally:
            for task in list(self._in_flight):
                task.cancel()

    async def _register(self) -> Optional[float]:
        """Register this incarnation; None when done, else how long to wait to retry."""
        sent = time.monotonic()
        try:
            res = await self.raft.submit(self.make_register(), self.register_timeout)
        except RaftUnavailable as exc:
            log.debug("registration not committed: %s", exc)
            return NO_LEADER_RETRY
        except Exception:
            log.exception("registration failed")
            return self.interval
        if not res.ok and res.code == "protocol":  # an older build than the cluster's
            log.error("registration refused: %s", res.error)
            self.refusal = res.error
            self.refused.set()  # the peer stops (jm/peer/main.py)
            return self.interval
        if not res.ok:
            log.warning("registration refused: %s", res.error)
            return self.interval
        self._incarnation += 1
        self.term.drop()  # a new incarnation: its lease starts now
        self._renew(sent)
        self.registered.set()
        self.dispatcher.unfence()
        return None

    async def _beat(self, incarnation: int) -> None:
        sent_mono = time.monotonic()
        try:
            hb = self.make_heartbeat(self.stamp(time.time()))
            # urgent: renewals are late (an election), or it tells a change (Spark ready,
            # disk low, a tenant's user missing) that placement should see now, not half
            # an interval later
            news = (hb.ready, hb.disk_low, hb.lacks)
            held = self.term.lease_from
            urgent = held is None or news != self._told \
                or sent_mono - held > 1.5 * self.interval
            res = await self.send(hb, self.timeout, urgent)
        except RaftUnavailable as exc:
            # no leader (an election) or no commit: try again soon, not an interval later,
            # so that the lease is renewed as soon as a leader is there
            log.debug("heartbeat not committed: %s", exc)
            if incarnation == self._incarnation:
                asyncio.get_running_loop().call_later(NO_LEADER_RETRY, self.now.set)
            return
        except Exception:
            log.exception("heartbeat failed")
            return
        if incarnation != self._incarnation or not self.registered.is_set():
            return  # this peer registered again since: the answer is about the old one
        if res.ok:
            self._told = news  # (told: later ones need not hurry)
            self._renew(sent_mono)
            if self.term.valid():  # an old ack may renew into the past
                self.dispatcher.unfence()
        elif res.code in ("stale", "not-found"):
            log.warning("this peer was declared dead; registering again")
            self.registered.clear()
            self.term.drop()
            self.executor.set_lease(0.0)  # the zygote stops everything now
            self._fence_first = True  # and the loop stops the JobMasters before registering
            self.now.set()

    async def watchdog(self) -> None:
        """Fencing: without an acknowledged heartbeat sent within jobmanager.lease-timeout,
        this peer may have been declared dead (the leader waits heartbeat.timeout, which is
        longer), so it stops every job process before anyone else can start them."""
        step = min(0.1, self.timeout / 10)
        while True:
            await asyncio.sleep(step)  # a periodic check, not a wait for state
            held = self.term.lease_from
            if held is None or self.dispatcher.fenced:
                continue
            if time.monotonic() - held > self.timeout:
                log.error("no heartbeat acknowledged for %.1f s (lease %.1f s): stopping all "
                          "job processes of this peer", time.monotonic() - held,
                          self.timeout)
                await self.dispatcher.fence()
