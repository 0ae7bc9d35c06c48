"""jm/policy/jobs/attempt.py: the attempts of one job, event in, instructions out (pure)."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from jm.policy.jobs.attempt import LEASE_LOST, AttemptState, Phase
from jm.policy.jobs.attemptio import (ArmStopTimer, Begin, CleanupSession, Committed, CompleteStop,
                                      DelayElapsed, Done, Exited, FailureRead, IntentsChanged, Kill,
                                      LeaseBack, ReadFailure, ReadResult, Release, Report, Reported,
                                      ResultRead, SavepointTaken, SessionCleaned, Spawn, Spawned,
                                      SpawnFailed, StopTimedOut, TakeSavepoint, WaitFor,
                                      WaitForLease)
from jm.policy.jobs.intents import Intents
from jm.policy.jobs.restart import RestartStrategy
from raft import state as S

NONE = RestartStrategy("none")
FIXED = RestartStrategy("fixed-delay", {"attempts": 2, "delay": 5.0})
FAIL = {"exception": "ValueError: boom", "traceback": "t"}
STOP = Intents(stop=("sp1", "/sp"))


def begun(st_: AttemptState) -> AttemptState:
    """Begun, and its INITIALIZING committed: its first process is to start."""
    assert st_.handle(Begin(), 0.0, 0.5) == [Report(S.INITIALIZING, 0)]
    assert st_.handle(Reported(S.INITIALIZING, 0, True), 0.0, 0.5) == [Spawn(0)]
    return st_


def running(strategy=FIXED, streaming=False) -> AttemptState:
    """A state whose first process (restart 0) runs and whose RUNNING is committed."""
    st_ = begun(AttemptState(strategy, streaming))
    assert st_.handle(Spawned(0), 0.0, 0.5) == [Report(S.RUNNING, 0)]
    assert st_.handle(Reported(S.RUNNING, 0, True), 0.0, 0.5) == []
    assert st_.live == 0
    return st_


def stopped(st_: AttemptState, intents: Intents) -> None:
    """Ask for `intents` while the process runs; it exits after SIGTERM."""
    assert st_.handle(IntentsChanged(intents), 1.0, 0.5) == [Kill(0, True), ArmStopTimer(0)]
    assert st_.handle(Exited(0, 0, 15), 1.0, 0.5) == [ReadResult(0)]


def test_a_job_that_returns_finishes():
    st_ = running()
    assert st_.handle(Exited(0, 0), 1.0, 0.5) == [ReadResult(0)]
    assert st_.handle(ResultRead(0, {"n": 3}), 1.0, 0.5) == [Report(S.FINISHED, 0, {"n": 3})]
    assert st_.handle(Reported(S.FINISHED, 0, True), 1.0, 0.5) == [Done(S.FINISHED)]
    assert st_.done and st_.handle(Exited(0, 1), 2.0, 0.5) == []


def test_a_finished_the_state_refuses_fails_and_a_refused_failure_ends_shorter():
    st_ = running()
    st_.handle(Exited(0, 0), 1.0, 0.5)
    st_.handle(ResultRead(0, "r" * 10), 1.0, 0.5)
    [failed] = st_.handle(Reported(S.FINISHED, 0, False, "invalid", "too big"), 1.0, 0.5)
    assert failed.status == S.FAILED and failed.failure["final"]
    assert "result could not be stored: too big" in failed.failure["exception"]
    [last] = st_.handle(Reported(S.FAILED, 0, False, "invalid", "unencodable"), 1.0, 0.5)
    assert last.status == S.FAILED and "could not be stored: unencodable" in \
        last.failure["exception"]
    [done] = st_.handle(Reported(S.FAILED, 0, False, "invalid", "again"), 1.0, 0.5)
    assert isinstance(done, Done) and not done.fenced and st_.done


def test_a_result_that_cannot_be_used_is_a_failure():
    st_ = running(NONE)
    st_.handle(Exited(0, 0), 1.0, 0.5)
    [r] = st_.handle(ResultRead(0, None, "result.json is a FIFO"), 1.0, 0.5)
    assert r.status == S.FAILED and r.failure["exception"] == "result.json is a FIFO"


def test_a_failure_restarts_after_the_delay_then_fails_when_attempts_are_used():
    st_ = running()
    assert st_.handle(Exited(0, 1), 1.0, 0.5) == [ReadFailure(0, 1, 0)]
    assert st_.handle(FailureRead(0, FAIL), 1.0, 0.5) == [Report(S.RESTARTING, 0, None, FAIL)]
    assert st_.live is None
    assert st_.handle(Reported(S.RESTARTING, 0, True), 1.0, 0.5) == [WaitFor(0, 5.0)]
    assert st_.handle(DelayElapsed(0), 6.0, 0.5) == [Spawn(1)]
    st_.handle(Spawned(1), 6.0, 0.5)
    st_.handle(Exited(1, 1), 7.0, 0.5)
    st_.handle(FailureRead(1, FAIL), 7.0, 0.5)
    st_.handle(Reported(S.RESTARTING, 1, True), 7.0, 0.5)
    assert st_.handle(DelayElapsed(1), 12.0, 0.5) == [Spawn(2)]
    st_.handle(Spawned(2), 12.0, 0.5)
    st_.handle(Exited(2, 1), 13.0, 0.5)
    [r] = st_.handle(FailureRead(2, FAIL), 13.0, 0.5)
    assert r.status == S.FAILED and r.failure["final"] and "2 restart attempts" in \
        r.failure["reason"]


def test_a_cancel_during_the_restart_delay_cancels_at_once():
    st_ = running()
    st_.handle(Exited(0, 1), 1.0, 0.5)
    st_.handle(FailureRead(0, FAIL), 1.0, 0.5)
    st_.handle(Reported(S.RESTARTING, 0, True), 1.0, 0.5)
    assert st_.handle(IntentsChanged(Intents(cancel=True)), 2.0, 0.5) == [
        Report(S.CANCELED, 0)]
    assert st_.handle(DelayElapsed(0), 6.0, 0.5) == []  # (the timer fires anyway)
    assert st_.handle(Reported(S.CANCELED, 0, True), 6.0, 0.5) == [Done(S.CANCELED)]


def test_a_cancel_stops_the_process_gracefully_then_by_force():
    st_ = running()
    assert st_.handle(IntentsChanged(Intents(cancel=True)), 1.0, 0.5) == [
        Kill(0, True), ArmStopTimer(0)]
    assert st_.handle(StopTimedOut(0), 31.0, 0.5) == [Kill(0, False)]
    assert st_.handle(Exited(0, 0, 9), 31.0, 0.5) == [ReadResult(0)]
    assert st_.handle(ResultRead(0), 31.0, 0.5) == [Report(S.CANCELED, 0)]


def test_a_stop_whose_savepoint_fails_runs_the_job_again_without_counting_a_failure():
    st_ = running(NONE)
    stopped(st_, STOP)
    assert st_.handle(ResultRead(0, "partial"), 1.0, 0.5) == [TakeSavepoint("sp1", "/sp")]
    assert st_.handle(SavepointTaken(None, "disk full"), 1.0, 0.5) == [
        CompleteStop("sp1", None, "disk full", "partial")]
    assert st_.handle(Committed(True), 1.0, 0.5) == [Spawn(1)]
    assert st_.tracker.failures == () and st_.intents.stop is None


def test_a_stop_with_a_savepoint_ends_with_its_commit():
    st_ = running()
    stopped(st_, STOP)
    st_.handle(ResultRead(0), 1.0, 0.5)
    st_.handle(SavepointTaken("/sp/savepoint-1", None), 1.0, 0.5)
    assert st_.handle(Committed(True), 1.0, 0.5) == [Done("stopped with a savepoint")]


def test_a_stop_withdrawn_while_its_savepoint_is_taken_still_commits_it():
    st_ = running()
    stopped(st_, STOP)
    st_.handle(ResultRead(0), 1.0, 0.5)
    assert st_.handle(IntentsChanged(Intents()), 1.0, 0.5) == []
    assert st_.handle(SavepointTaken("/sp/1", None), 1.0, 0.5) == [
        CompleteStop("sp1", "/sp/1", None, None)]


def test_a_move_withdrawn_mid_stop_runs_the_job_again_here():
    st_ = running()
    stopped(st_, Intents(move_to="n2"))
    assert st_.handle(IntentsChanged(Intents()), 1.0, 0.5) == []
    assert st_.handle(ResultRead(0), 1.0, 0.5) == [Spawn(1)]


def test_a_move_releases_the_job():
    st_ = running()
    stopped(st_, Intents(move_to="n2"))
    assert st_.handle(ResultRead(0), 1.0, 0.5) == [Release()]
    assert st_.handle(Committed(False, "invalid", "moved elsewhere"), 1.0, 0.5) == [
        Done("moved")]


def test_a_lease_that_runs_out_while_restarting():
    """The job failed; during its restart delay the lease runs out: the zygote refuses
    the next spawn, that is no failure of the job, and it runs once the lease is back."""
    st_ = running()
    st_.handle(Exited(0, 1), 1.0, 0.5)
    st_.handle(FailureRead(0, FAIL), 1.0, 0.5)
    st_.handle(Reported(S.RESTARTING, 0, True), 1.0, 0.5)
    assert st_.handle(DelayElapsed(0), 6.0, 0.5) == [Spawn(1)]
    assert st_.handle(Spawned(1, refused=True), 6.0, 0.5) == []  # no RUNNING
    assert st_.handle(IntentsChanged(Intents()), 6.0, 0.5) == []
    assert st_.handle(Exited(1, -1, 0, lease_expired=True), 6.0, 0.5) == [
        Report(S.RESTARTING, 1, None, LEASE_LOST)]
    assert st_.handle(Reported(S.RESTARTING, 1, True), 6.0, 0.5) == [WaitForLease()]
    assert st_.handle(LeaseBack(), 9.0, 0.5) == [Spawn(2)]
    assert len(st_.tracker.failures) == 1  # the lease's exit did not count


def test_a_stale_report_fences_and_nothing_follows():
    st_ = running()
    assert st_.handle(Reported(S.RUNNING, 0, False, "stale", "epoch 2 owns it"), 1.0, 0.5) \
        == [Done("RUNNING refused: epoch 2 owns it", fenced=True)]
    assert st_.handle(Exited(0, 1), 1.0, 0.5) == []
    assert st_.handle(IntentsChanged(Intents(cancel=True)), 1.0, 0.5) == []


def test_a_stale_commit_fences():
    st_ = running()
    stopped(st_, Intents(move_to="n2"))
    st_.handle(ResultRead(0), 1.0, 0.5)
    assert st_.handle(Committed(False, "stale", "x"), 1.0, 0.5) == [
        Done("commit refused: x", fenced=True)]


def test_a_streaming_job_killed_by_a_signal_has_its_session_cleaned_first():
    st_ = running(NONE, streaming=True)
    assert st_.handle(Exited(0, -9, 9), 1.0, 0.5) == [CleanupSession(0)]
    assert st_.handle(SessionCleaned(0), 1.0, 0.5) == [ReadFailure(0, -9, 9)]


def test_an_attempt_that_cannot_start():
    st_ = begun(AttemptState(FIXED, False))
    assert st_.handle(SpawnFailed(0, FAIL), 0.0, 0.5) == [Report(S.RESTARTING, 0, None, FAIL)]
    st_ = begun(AttemptState(FIXED, False))
    [r] = st_.handle(SpawnFailed(0, dict(FAIL, final=True), final=True), 0.0, 0.5)
    assert r.status == S.FAILED


def test_the_process_starts_only_once_its_attempt_is_known_to_have_started_here():
    """A peer lost as the job's process starts is then always evidence against the job
    (the attempt was reported here: raft/jobs.py peer_losses)."""
    st_ = AttemptState(FIXED, False)
    assert st_.handle(Begin(), 0.0, 0.5) == [Report(S.INITIALIZING, 0)]
    assert st_.handle(Reported(S.RUNNING, 0, True), 0.0, 0.5) == []  # not that one
    assert st_.handle(Reported(S.INITIALIZING, 0, False, "stale", "moved"), 0.0, 0.5) == \
        [Done("INITIALIZING refused: moved", fenced=True)]
    st_ = AttemptState(FIXED, False)
    st_.handle(Begin(), 0.0, 0.5)
    assert st_.handle(IntentsChanged(Intents(cancel=True)), 0.0, 0.5) == []
    assert st_.handle(Reported(S.INITIALIZING, 0, True), 0.0, 0.5) == [Report(S.CANCELED, 0)]


def test_a_request_before_the_first_spawn_is_acted_on_without_one():
    st_ = AttemptState(FIXED, False, Intents(cancel=True))
    assert st_.handle(Begin(), 0.0, 0.5) == [Report(S.INITIALIZING, 0), Report(S.CANCELED, 0)]


# ---- attempts that lost their peer as they started ---------------------------------------
LOST = tuple(S.PeerLoss(n, t) for n, t in (("n1", 10.0), ("n2", 14.0), ("n3", 18.0),
                                           ("n1", 22.0)))


def test_two_peers_lost_as_the_job_started_are_hosts_lost_not_the_jobs_doing():
    begun(AttemptState(NONE, False, losses=LOST[:2]))


def test_each_further_peer_lost_counts_against_the_restart_strategy():
    st_ = AttemptState(FIXED, False, losses=LOST[:4])  # 2 count: 2 attempts, both used
    init, restarting = st_.handle(Begin(), 100.0, 0.5)
    assert init == Report(S.INITIALIZING, 0) and restarting.status == S.RESTARTING
    assert "last 4 attempts each ended with the loss of the peer" in \
        restarting.failure["exception"] and "(n1, n2, n3, n1)" in restarting.failure["exception"]
    assert st_.handle(Reported(S.RESTARTING, 0, True), 100.0, 0.5) == [WaitFor(0, 5.0)]
    assert st_.handle(DelayElapsed(0), 105.0, 0.5) == [Spawn(0)]  # its first process
    st_.handle(Spawned(0), 105.0, 0.5)
    st_.handle(Exited(0, 1), 106.0, 0.5)
    [failed] = st_.handle(FailureRead(0, FAIL), 106.0, 0.5)  # the strategy is used up
    assert failed.status == S.FAILED and failed.failure["final"]


def test_a_job_that_keeps_killing_its_peers_fails_once_its_strategy_is_used():
    lost = LOST + (S.PeerLoss("n2", 26.0),)  # 3 count, the strategy allows 2
    st_ = AttemptState(FIXED, False, losses=lost)
    init, failed = st_.handle(Begin(), 100.0, 0.5)
    assert failed.status == S.FAILED and failed.failure["final"]
    assert "fixed-delay: 2 restart attempts used" == failed.failure["reason"]
    assert "may be what kills its peers" in failed.failure["exception"]
    assert st_.handle(Reported(S.FAILED, 0, True), 100.0, 0.5) == [Done(S.FAILED)]
    assert AttemptState(NONE, False, losses=LOST[:3]).handle(Begin(), 0.0, 0.5)[1].status \
        == S.FAILED  # no restarts at all: the third loss in a row


def test_peer_losses_grow_an_exponential_delay_at_their_own_times():
    exp = RestartStrategy("exponential-delay", {
        "initial-backoff": 1.0, "max-backoff": 60.0, "backoff-multiplier": 2.0,
        "reset-backoff-threshold": 3.0, "jitter-factor": 0.0,
        "attempts-before-reset-backoff": 100})
    assert _first_delay(exp, LOST[:3]) == 1.0
    assert _first_delay(exp, LOST) == 1.0  # 4 s apart: past the reset threshold
    close = tuple(S.PeerLoss("n", t) for t in (9.0, 10.0, 11.0, 12.0, 13.0))
    assert _first_delay(exp, close) == 4.0  # 1, 2, 4


def _first_delay(strategy, losses) -> float:
    st_ = AttemptState(strategy, False, losses=losses)
    st_.handle(Begin(), 100.0, 0.5)
    [wait] = st_.handle(Reported(S.RESTARTING, 0, True), 100.0, 0.5)
    return wait.seconds


def test_a_cancel_before_the_start_of_a_suspect_job_cancels_it_without_counting():
    st_ = AttemptState(NONE, False, losses=LOST, intents=Intents(cancel=True))
    assert st_.handle(Begin(), 0.0, 0.5) == [Report(S.INITIALIZING, 0),
                                             Report(S.CANCELED, 0)]


def test_events_about_another_process_are_dropped():
    st_ = running()
    assert st_.handle(Exited(5, 1), 1.0, 0.5) == []
    assert st_.handle(DelayElapsed(0), 1.0, 0.5) == []
    assert st_.handle(StopTimedOut(0), 1.0, 0.5) == []
    assert st_.phase is Phase.RUNNING


# ---- no sequence of events breaks the rules -------------------------------------------
_INTENTS = [Intents(), Intents(cancel=True), STOP, Intents(move_to="n2")]


class World:
    """Answers the state's instructions as the driver's world could, in any order."""

    def __init__(self) -> None:
        self.live: set[int] = set()       # processes that run (or are being started)
        self.pending: list = []           # events the world owes the state
        self.fenced = False

    def take(self, instructions: list) -> None:
        for ins in instructions:
            assert not self.fenced or isinstance(ins, Done), f"{ins} after a stale answer"
            if isinstance(ins, Spawn):
                assert not self.live, f"a second process while {self.live} runs"
                self.live.add(ins.restart)
                self.pending += [Spawned(ins.restart), Spawned(ins.restart, refused=True),
                                 SpawnFailed(ins.restart, FAIL)]
            elif isinstance(ins, Report):
                self.pending += [Reported(ins.status, ins.restart, True),
                                 Reported(ins.status, ins.restart, False, "invalid", "no"),
                                 Reported(ins.status, ins.restart, False, "stale", "no")]
            elif isinstance(ins, (ReadResult,)):
                self.pending += [ResultRead(ins.restart, 1), ResultRead(ins.restart, None, "x")]
            elif isinstance(ins, ReadFailure):
                self.pending.append(FailureRead(ins.restart, FAIL))
            elif isinstance(ins, CleanupSession):
                self.pending.append(SessionCleaned(ins.restart))
            elif isinstance(ins, ArmStopTimer):
                self.pending.append(StopTimedOut(ins.restart))
            elif isinstance(ins, WaitFor):
                self.pending.append(DelayElapsed(ins.restart))
            elif isinstance(ins, WaitForLease):
                self.pending.append(LeaseBack())
            elif isinstance(ins, TakeSavepoint):
                self.pending += [SavepointTaken("/sp/x", None), SavepointTaken(None, "no")]
            elif isinstance(ins, (Release, CompleteStop)):
                self.pending += [Committed(True), Committed(False, "stale", "no")]

    def feed(self, ev) -> None:
        if isinstance(ev, SpawnFailed):
            self.live.discard(ev.restart)
            self.pending = [p for p in self.pending if not (
                isinstance(p, Spawned) and p.restart == ev.restart)]
        elif isinstance(ev, Spawned):
            self.pending = [p for p in self.pending if not (
                isinstance(p, (Spawned, SpawnFailed)) and p.restart == ev.restart)]
            self.pending += [Exited(ev.restart, 0), Exited(ev.restart, 1, 9),
                             Exited(ev.restart, -1, 0, lease_expired=True)]
        elif isinstance(ev, Exited):
            self.live.discard(ev.restart)
            self.pending = [p for p in self.pending if not (
                isinstance(p, Exited) and p.restart == ev.restart)]
        elif isinstance(ev, (Reported, Committed)) and ev.code == "stale":
            self.fenced = True


@settings(max_examples=300, deadline=None)
@given(st.data(), st.sampled_from([NONE, FIXED]), st.booleans())
def test_no_sequence_of_events_runs_two_processes_or_reports_after_a_stale_answer(
        data, strategy, streaming):
    losses = tuple(S.PeerLoss(f"n{i}", 10.0 * i) for i in range(data.draw(st.integers(0, 4))))
    state, world, now = AttemptState(strategy, streaming, losses=losses), World(), 0.0
    world.take(state.handle(Begin(), now, 0.5))
    for _ in range(60):
        choices = world.pending + [IntentsChanged(i) for i in _INTENTS]
        ev = data.draw(st.sampled_from(choices))
        if ev in world.pending:
            world.pending.remove(ev)
        world.feed(ev)
        now += data.draw(st.floats(0, 10))
        world.take(state.handle(ev, now, data.draw(st.floats(0, 0.999))))
        if world.fenced:
            assert state.done
        if state.done:
            assert state.handle(IntentsChanged(Intents(cancel=True)), now, 0.5) == []
            break


def test_a_hopeless_failure_fails_at_once_whatever_the_strategy():
    st_ = running(FIXED)
    failure = dict(FAIL, hopeless="the job's code does not compile")
    st_.handle(Exited(0, 1), 1.0, 0.5)
    [r] = st_.handle(FailureRead(0, failure), 1.0, 0.5)
    assert r.status == S.FAILED and r.failure["final"]
    assert r.failure["reason"] == "not restarted: the job's code does not compile"
    assert r.failure["exception"] == FAIL["exception"]
