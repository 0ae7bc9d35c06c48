"""The attempts of one job on the peer that owns it (one epoch), decided purely.

`AttemptState.handle(event, now, rnd) -> [instruction]`: events say what happened (the
job process started or exited, a report was committed or refused, the replicated state
asks for a cancel, stop or move, a delay elapsed, the lease came back, a file was read);
instructions say what to do (spawn, kill, report, read, take a savepoint, commit, wait).
No asyncio, no files, no clock: `now` (this host's monotonic seconds) and `rnd` (in
[0, 1)) come in with each event. jm/cluster/jobs/jobmaster.py is the driver: it turns I/O into
events and performs the instructions (the models: dask's worker state machine, etcd raft).

The rules kept here:
* at most one job process of this epoch at a time: a spawn only once the last one exited;
* nothing is reported after a report or a commit was refused as stale (another epoch
  owns the job now): the machine is done and the driver kills what runs (fenced);
* a terminal status is the last report; a FINISHED the state refuses becomes a FAILED,
  a FAILED it refuses a shorter FAILED, once;
* a restart waits for its RESTARTING report, then for the strategy's delay (cut short by
  a cancel, stop or move); an exit because the lease ran out is not the job's failure:
  it runs again once the lease is back;
* a cancel, stop or move stops the process gracefully (SIGTERM, SIGKILL after the
  cancel timeout), then concludes: CANCELED; a savepoint and its commit (a failed one
  runs the job again, not counted as a failure); the release of the job to its new peer.
"""
from __future__ import annotations

import enum
from dataclasses import replace
from typing import Any, Optional

from jm.policy.jobs.attemptio import (Begin, IntentsChanged, Spawned, SpawnFailed, Exited,
                                      Reported, StopTimedOut, SessionCleaned, ResultRead,
                                      FailureRead, SavepointTaken, Committed, DelayElapsed,
                                      LeaseBack, Event, Report, Spawn, Kill, ArmStopTimer,
                                      CleanupSession, ReadResult, ReadFailure, TakeSavepoint,
                                      Release, CompleteStop, WaitFor, WaitForLease, Done)
from jm.policy.jobs.intents import Ending, Intents
from jm.policy.jobs.restart import RestartStrategy, RestartTracker, on_failure
from raft import state as S


# the first losses of a run of attempts that lost their peer right after they started are
# taken for hosts lost one after the other (an operator's kills, a rack going down): from
# the next one on, the job may be what kills them, and each counts against its restart
# strategy (with `none`: it fails at the third loss in a row)
HOST_LOSSES = 2

LEASE_LOST = {"exception": "LeaseExpired: the job process was stopped because this peer "
                           "lost its lease", "traceback": ""}


class Phase(enum.Enum):
    NEW = "new"
    STARTING = "starting"        # the INITIALIZING report is on its way
    PREPARING = "preparing"      # Spawn sent
    RUNNING = "running"          # a job process runs
    STOPPING = "stopping"        # asked to stop for a cancel, stop or move
    CLEANING = "cleaning"        # its streaming queries are being stopped
    READING = "reading"          # its result or failure is being read
    RESTARTING = "restarting"    # the RESTARTING report is on its way
    DELAY = "delay"              # the restart strategy's delay
    LEASE = "lease"              # waiting for the lease to come back
    SAVEPOINT = "savepoint"      # the stop's savepoint is being taken
    COMMITTING = "committing"    # a release or a stop's outcome is on its way
    ENDING = "ending"            # the terminal report is on its way
    DONE = "done"


class AttemptState:
    """The attempts of one job in one epoch. `handle` is the only way in."""

    def __init__(self, strategy: RestartStrategy, streaming: bool,
                 intents: Intents = Intents(), losses: tuple = ()) -> None:
        self.strategy = strategy
        self.streaming = streaming
        self.intents = intents
        self.losses = losses          # S.PeerLoss: the run of attempts before this epoch
        self.tracker = RestartTracker()
        self.phase = Phase.NEW
        self.restart = 0              # the restart index of the current (or next) process
        self.used = False             # a process of `restart` was spawned
        self.refused = False          # ... and the zygote ran nothing (no lease)
        self.live: Optional[int] = None   # the restart whose RUNNING was committed
        self.after: Optional[str] = None  # after RESTARTING: "delay" or "lease"
        self.delay = 0.0
        self.ending: Optional[Report] = None  # the terminal report on its way
        self.last_resort = False      # the ending report is the shortest FAILED already
        self.stopped_by_us = False    # the exit being handled followed our stop request
        self.exit: Optional[Exited] = None
        self.savepoint: Optional[SavepointTaken] = None
        self.trigger: Optional[str] = None   # the stop being concluded
        self.result: Any = None       # the result a stopped attempt left (for its stop)

    # ---- the one way in ----------------------------------------------------------------
    def handle(self, event: Event, now: float, rnd: float) -> list:
        if self.phase is Phase.DONE:
            return []
        if isinstance(event, Reported) and not event.ok and event.code == "stale":
            return self._fenced(f"{event.status} refused: {event.error}")
        if isinstance(event, Committed) and not event.ok and event.code == "stale":
            return self._fenced(f"commit refused: {event.error}")
        handler = _HANDLERS.get(type(event))
        return handler(self, event, now, rnd) if handler is not None else []

    @property
    def done(self) -> bool:
        return self.phase is Phase.DONE

    # ---- handlers (one per event type) -----------------------------------------------
    def _begin(self, ev: Begin, now: float, rnd: float) -> list:
        if self.phase is not Phase.NEW:
            return []
        out = [Report(S.INITIALIZING, self.restart)]
        if self.intents.kind() is not None:
            return out + self._next()  # acted on without a process
        if len(self.losses) > HOST_LOSSES:
            return out + self._lost_peers(now, rnd)
        # the process starts once the report is in: the attempt is then known to have
        # started here, so its peer's loss counts as evidence against the job (a run of
        # such losses, raft/jobs.py peer_losses), however soon the loss comes
        self.phase = Phase.STARTING
        return out

    def _intents(self, ev: IntentsChanged, now: float, rnd: float) -> list:
        self.intents = ev.intents
        if self.intents.kind() is None:
            return []
        if self.phase is Phase.RUNNING and not self.refused:
            return self._stop()
        if self.phase is Phase.DELAY:
            return self._next()
        return []

    def _spawned(self, ev: Spawned, now: float, rnd: float) -> list:
        if self.phase is not Phase.PREPARING or ev.restart != self.restart:
            return []
        self.phase, self.refused = Phase.RUNNING, ev.refused
        if ev.refused:  # the zygote ran nothing: its exit (lease expired) follows
            return []
        out = [Report(S.RUNNING, self.restart)]
        return out + (self._stop() if self.intents.kind() is not None else [])

    def _spawn_failed(self, ev: SpawnFailed, now: float, rnd: float) -> list:
        if self.phase is not Phase.PREPARING or ev.restart != self.restart:
            return []
        if ev.final:
            return self._end(S.FAILED, failure=ev.failure)
        return self._failed(ev.failure, now, rnd)

    def _exited(self, ev: Exited, now: float, rnd: float) -> list:
        if self.phase not in (Phase.RUNNING, Phase.STOPPING) or ev.restart != self.restart:
            return []
        self.stopped_by_us = self.phase is Phase.STOPPING
        self.live, self.exit = None, ev
        if ev.lease_expired and not self.stopped_by_us:
            # not the job's fault: run it again once the lease is back (a stale epoch
            # fences this JobMaster at the report)
            return self._restarting(LEASE_LOST, "lease")
        if ev.signal and self.streaming:  # its queries may outlive it in the Spark server
            self.phase = Phase.CLEANING
            return [CleanupSession(self.restart)]
        return self._read()

    def _cleaned(self, ev: SessionCleaned, now: float, rnd: float) -> list:
        if self.phase is not Phase.CLEANING or ev.restart != self.restart:
            return []
        return self._read()

    def _result_read(self, ev: ResultRead, now: float, rnd: float) -> list:
        if self.phase is not Phase.READING or ev.restart != self.restart:
            return []
        if self.stopped_by_us:
            kind = self.intents.kind()  # None: the request was withdrawn meanwhile
            return self._conclude(kind, ev.result) if kind is not None else self._next()
        if ev.problem is None:
            return self._end(S.FINISHED, result=ev.result)
        return self._failed({"exception": ev.problem, "traceback": ""}, now, rnd)

    def _failure_read(self, ev: FailureRead, now: float, rnd: float) -> list:
        if self.phase is not Phase.READING or ev.restart != self.restart:
            return []
        return self._failed(ev.failure, now, rnd)

    def _reported(self, ev: Reported, now: float, rnd: float) -> list:
        if self.phase is Phase.STARTING and ev.status == S.INITIALIZING:
            return self._next()  # (refused as stale, it was fenced before this)
        if ev.status == S.RUNNING and ev.ok and ev.restart == self.restart \
                and self.phase in (Phase.RUNNING, Phase.STOPPING):
            self.live = self.restart
            return []
        if self.phase is Phase.RESTARTING and ev.status == S.RESTARTING \
                and ev.restart == self.restart:
            return self._after_restarting()
        if self.phase is Phase.ENDING and self.ending is not None \
                and ev.status == self.ending.status:
            return self._ended(ev)
        return []

    def _stop_timed_out(self, ev: StopTimedOut, now: float, rnd: float) -> list:
        if self.phase is Phase.STOPPING and ev.restart == self.restart:
            return [Kill(self.restart, graceful=False)]
        return []

    def _delay_elapsed(self, ev: DelayElapsed, now: float, rnd: float) -> list:
        if self.phase is Phase.DELAY and ev.restart == self.restart:
            return self._next()
        return []

    def _lease_back(self, ev: LeaseBack, now: float, rnd: float) -> list:
        return self._next() if self.phase is Phase.LEASE else []

    def _savepoint_taken(self, ev: SavepointTaken, now: float, rnd: float) -> list:
        if self.phase is not Phase.SAVEPOINT:
            return []
        self.phase, self.savepoint = Phase.COMMITTING, ev
        return [CompleteStop(self.trigger, ev.location, ev.failure, self.result)]

    def _committed(self, ev: Committed, now: float, rnd: float) -> list:
        if self.phase is not Phase.COMMITTING:
            return []
        if self.savepoint is None:  # the release of a move (refused or not: it is over)
            return self._finish("moved")
        taken, self.savepoint = self.savepoint, None
        if taken.failure is None and ev.ok:
            return self._finish("stopped with a savepoint")
        # the stop failed (or was superseded): the job runs again, not counted as a failure
        self.intents = replace(self.intents, stop=None)
        return self._next()

    # ---- steps ---------------------------------------------------------------------------
    def _next(self) -> list:
        """Nothing runs: act on a request, or start the next process."""
        kind = self.intents.kind()
        if kind is not None:
            return self._conclude(kind, None)
        if self.used:
            self.restart += 1
        self.used, self.phase, self.exit = True, Phase.PREPARING, None
        return [Spawn(self.restart)]

    def _stop(self) -> list:
        self.phase = Phase.STOPPING
        return [Kill(self.restart, graceful=True), ArmStopTimer(self.restart)]

    def _read(self) -> list:
        self.phase = Phase.READING
        ev = self.exit
        if self.stopped_by_us or ev.code == 0:
            return [ReadResult(self.restart)]
        return [ReadFailure(self.restart, ev.code, ev.signal)]

    def _conclude(self, kind: Ending, result: Any) -> list:
        """Finish a cancel, stop-with-savepoint or move once no job process runs."""
        if kind is Ending.CANCEL:
            return self._end(S.CANCELED)
        if kind is Ending.MOVE:
            self.phase, self.savepoint = Phase.COMMITTING, None
            return [Release()]
        self.phase, self.result, self.trigger = Phase.SAVEPOINT, result, self.intents.stop[0]
        return [TakeSavepoint(*self.intents.stop)]

    def _failed(self, failure: dict, now: float, rnd: float) -> list:
        why = failure.get("hopeless")  # the job process found it cannot pass on a restart
        self.tracker, decision = on_failure(self.strategy, self.tracker, now, rnd,
                                            why if isinstance(why, str) else None)
        if not decision.restart:
            return self._end(S.FAILED, failure=dict(failure, final=True,
                                                    reason=decision.reason))
        self.delay = decision.delay
        return self._restarting(failure, "delay")

    def _lost_peers(self, now: float, rnd: float) -> list:
        """Its last attempts each lost their peer right after they started: all but the
        first HOST_LOSSES of them count against its restart strategy, at their times
        relative to the last (the leader's clock)."""
        last = self.losses[-1].end
        for loss in self.losses[HOST_LOSSES:]:
            self.tracker, decision = on_failure(
                self.strategy, self.tracker, now - max(last - loss.end, 0.0), rnd)
        failure = {"exception": (
            f"PeerLost: its last {len(self.losses)} attempts each ended with the loss of "
            f"the peer running it within {S.YOUNG_LOSS:g} s of starting "
            f"({', '.join(x.node for x in self.losses)}); the job may be what kills its "
            f"peers (memory, signals): {len(self.losses) - HOST_LOSSES} of them count "
            "against its restart strategy"), "traceback": ""}
        if not decision.restart:
            return self._end(S.FAILED, failure=dict(failure, final=True,
                                                    reason=decision.reason))
        self.delay = decision.delay
        return self._restarting(failure, "delay")

    def _restarting(self, failure: dict, after: str) -> list:
        self.phase, self.after = Phase.RESTARTING, after
        return [Report(S.RESTARTING, self.restart, failure=failure)]

    def _after_restarting(self) -> list:
        if self.after == "lease":
            self.phase = Phase.LEASE
            return [WaitForLease()]
        if self.intents.kind() is not None or self.delay <= 0:
            return self._next()
        self.phase = Phase.DELAY
        return [WaitFor(self.restart, self.delay)]

    def _end(self, status: str, result: Any = None, failure: Optional[dict] = None) -> list:
        self.phase = Phase.ENDING
        self.ending = Report(status, self.restart, result=result, failure=failure)
        return [self.ending]

    def _ended(self, ev: Reported) -> list:
        if ev.ok:
            return self._finish(ev.status)
        if ev.status == S.FINISHED:  # e.g. a result the replicated state cannot hold
            return self._end(S.FAILED, failure={
                "exception": f"the job's result could not be stored: {ev.error}",
                "traceback": "", "final": True})
        if ev.status == S.FAILED and not self.last_resort:
            # the job must end: a failure the state cannot hold ends it all the same
            self.last_resort = True
            return self._end(S.FAILED, failure={
                "exception": f"the job failed; its failure could not be stored: {ev.error}",
                "traceback": "", "final": True})
        return self._finish(f"{ev.status} refused: {ev.error}")

    def _finish(self, reason: str) -> list:
        self.phase, self.live = Phase.DONE, None
        return [Done(reason)]

    def _fenced(self, why: str) -> list:
        self.phase, self.live = Phase.DONE, None
        return [Done(why, fenced=True)]


_HANDLERS = {
    Begin: AttemptState._begin, IntentsChanged: AttemptState._intents,
    Spawned: AttemptState._spawned, SpawnFailed: AttemptState._spawn_failed,
    Exited: AttemptState._exited, SessionCleaned: AttemptState._cleaned,
    ResultRead: AttemptState._result_read, FailureRead: AttemptState._failure_read,
    Reported: AttemptState._reported, StopTimedOut: AttemptState._stop_timed_out,
    DelayElapsed: AttemptState._delay_elapsed, LeaseBack: AttemptState._lease_back,
    SavepointTaken: AttemptState._savepoint_taken, Committed: AttemptState._committed,
}
