"""Pure: what a peer told to stop (SIGTERM, `bin/jobmanager.sh stop`, systemd, Kubernetes)
does about the jobs it holds before it stops (jm/cluster/members/stopdrain.py drives it).

It drains itself like `POST /nodes/{node}/drain` with `jobmanager.stop.drain-deadline`:
streaming jobs move to the other peers at a micro-batch boundary, batch jobs finish or, at
the deadline, run again elsewhere; it stops once it holds no job, at the latest
`wait_budget` after it asked. It stops without draining when draining could only hang:
no Raft leader, no majority (its lease ran out), no other peer to take its jobs.

How long a supervisor must give a stopping peer (`stop_grace`): the wait, plus what
`Peer.stop` may take, plus a margin; bin/jobmanager.sh, the systemd unit and the
Kubernetes pod's grace period are sized from it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

MOVE_MARGIN = 5.0     # s past deadline + cancel-timeout for the deadline's moves to land
STOP_TIMEOUT = 20.0   # s: Peer.stop's own bound (jm/peer/peer.py)
EXIT_MARGIN = 5.0     # s: the interpreter's exit, the loop's last tasks

SKIP, DRAIN, WAIT = "skip", "drain", "wait"


@dataclass(frozen=True)
class SelfView:
    """The stopping peer's own record in the replicated state."""
    alive: bool
    draining: bool
    by_stop: bool      # its drain is its own stop's (DrainPeer.by_stop)
    leaving: bool      # being removed (DELETE /cluster/peers): it drains already
    jobs: int          # jobs assigned to it
    deadline: Optional[float] = None  # its drain's deadline (PeerRecord.drain_deadline)


@dataclass(frozen=True)
class StopMarker:
    """What a stopping peer wrote in its data dir when the cluster's protocol drops
    `DrainPeer.by_stop` (raft/protocol.py: peers of an older build run beside it): its
    own drain is then recorded like an operator's, and only this tells them apart."""
    deadline: Optional[float]


@dataclass(frozen=True)
class StopView:
    """What the decisions look at, read from the local replica at one instant."""
    me: Optional[SelfView]  # None: not registered (never was, or retired)
    has_leader: bool
    lease_valid: bool       # it holds its lease: a Raft majority acknowledged it lately
    targets: int            # other live peers that take work (ready, not draining/leaving)


@dataclass(frozen=True)
class Decision:
    action: str   # SKIP: stop now; DRAIN: ask for a drain, then wait; WAIT: drained already
    reason: str


@dataclass(frozen=True)
class Step:
    done: bool
    reason: str = ""
    jobs: int = 0


def how_to_stop(view: StopView, deadline: float) -> Decision:
    """Whether a stopping peer drains (DRAIN), waits for a drain already under way (an
    operator's, or its removal's: WAIT), or stops at once (SKIP, with the reason)."""
    me = view.me
    if deadline <= 0:
        return Decision(SKIP, "jobmanager.stop.drain-deadline is 0")
    if me is None or not me.alive:
        return Decision(SKIP, "it is not a live registered peer")
    if not view.has_leader:
        return Decision(SKIP, "there is no Raft leader")
    if not view.lease_valid:
        return Decision(SKIP, "it holds no lease (no Raft majority)")
    if me.jobs and view.targets == 0:
        return Decision(SKIP, "no other live peer can take its jobs")
    if me.draining or me.leaving:
        return Decision(WAIT, "it is being drained already" + (
            " (being removed)" if me.leaving else ""))
    if view.targets == 0:
        return Decision(SKIP, "it is the only live peer")
    return Decision(DRAIN, "it drains itself")


def progress(view: StopView, now: float, until: float) -> Step:
    """One look at a drain in progress: done (drained, the deadline passed, or the drain
    cannot go on) or not yet."""
    me = view.me
    if me is None or me.jobs == 0:
        return Step(True, "drained")
    if not me.alive:
        return Step(True, "it was declared dead", me.jobs)
    if not view.lease_valid:
        return Step(True, "it lost its lease (no Raft majority)", me.jobs)
    if not me.draining and not me.leaving:
        return Step(True, "its drain was ended", me.jobs)
    if view.targets == 0:  # (the other peers stop too: bin/stop-cluster.sh, a pod's end)
        return Step(True, "no other live peer can take its jobs", me.jobs)
    if now >= until:
        return Step(True, "the drain deadline passed", me.jobs)
    return Step(False, "", me.jobs)


def wait_budget(deadline: float, cancel_timeout: float) -> float:
    """How long a stopping peer waits for its drain: the drain deadline (then its batch
    jobs move, restarting), their stop (SIGTERM, SIGKILL after cancel-timeout) and a
    margin for the moves to be committed. 0: no drain."""
    return deadline + cancel_timeout + MOVE_MARGIN if deadline > 0 else 0.0


def stop_grace(deadline: float, cancel_timeout: float) -> float:
    """The longest a peer takes to exit after SIGTERM: what a supervisor must wait before
    it kills it (bin/jobmanager.sh, systemd TimeoutStopSec, Kubernetes'
    terminationGracePeriodSeconds)."""
    return wait_budget(deadline, cancel_timeout) + STOP_TIMEOUT + EXIT_MARGIN


def should_undrain(me: Optional[SelfView], marker: Optional[StopMarker] = None) -> bool:
    """A starting peer ends the drain its last stop began (never an operator's): the
    record says so, or (an older protocol dropped that) its marker names the drain the
    record holds. An operator's drain since, with another deadline, stays."""
    if me is None or not me.draining or me.leaving:
        return False
    return me.by_stop or (marker is not None and marker.deadline == me.deadline)
