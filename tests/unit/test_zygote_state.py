"""jm/runtime/zygotestate.py: the zygote's decisions, event in, actions out (pure), and
the messages of jm/runtime/zygoteproto.py."""
from __future__ import annotations

import ast
import signal

import msgpack
import pytest
from hypothesis import given, settings, strategies as st

from jm.policy.jobs.runparams import RunParams
from jm.runtime.zygoteproto import (Error, Exited, Guard, Lease, ProtocolError, Ready, Spawn,
                                    Spawned, next_frame, pack, unpack)
from jm.runtime.zygotestate import (PAUSED_POLL, ChildEnding, ChildReaped, ChildStopped,
                                    Continue, DropCgroup, Exit, Fork, Forked, Garbled,
                                    InputClosed, KillJob, KillLeftovers, KillPid, PeerSeen,
                                    Send, Tick, ZygoteState, refused)

P = RunParams(job_id="j", attempt=1, node="n", log_path="/l/j.log", result_path="/r/result.json",
              error_path="/r/error.json", checkpoint_dir="/c")


def leased(until: float = 10.0) -> ZygoteState:
    z = ZygoteState()
    assert z.handle(Lease(until), 0.0) == []
    return z


def forked(z: ZygoteState, key: str, pid: int, now: float = 1.0) -> None:
    assert z.handle(Spawn(key, P), now) == [Fork(key, P)]
    assert z.handle(Forked(key, pid), now) == [Send(Spawned(key, pid))]


def test_the_state_is_pure():
    import jm.runtime.zygotestate as mod
    names = set()
    for node in ast.walk(ast.parse(open(mod.__file__).read())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module)
    assert names == {"__future__", "dataclasses", "typing", "jm.runtime.zygoteproto",
                     "jm.policy.jobs.runparams"}  # (pure: jm/policy/)
    assert refused("k") == Exited("k", 0, -int(signal.SIGKILL), int(signal.SIGKILL), True)


# ---- spawns ------------------------------------------------------------------------------

def test_spawn_without_a_lease_yet_forks():
    z = ZygoteState()  # no Lease sent yet: the peer has not fenced us
    assert z.handle(Spawn("k", P), 5.0) == [Fork("k", P)]


def test_spawn_within_the_lease_forks_and_reports_the_pid():
    z = leased()
    forked(z, "k", 42)
    assert z.children == {42: "k"}


def test_spawn_past_the_lease_is_refused_not_forked():
    z = leased(10.0)
    assert z.handle(Spawn("k", P), 10.5) == [Send(Exited("k", 0, -9, 9, True))]
    assert z.children == {}


def test_spawn_at_the_lease_end_still_runs():
    assert leased(10.0).handle(Spawn("k", P), 10.0) == [Fork("k", P)]


# ---- the lease ---------------------------------------------------------------------------

def test_lease_running_out_kills_every_job_and_the_guarded_once():
    z = leased(10.0)
    forked(z, "a", 41)
    forked(z, "b", 42)
    assert z.handle(Guard([7, 8]), 1.0) == []
    assert z.handle(Tick(), 9.0) == []
    assert z.handle(Tick(), 10.5) == [KillPid(8), KillPid(7), KillJob(41), KillJob(42)]
    assert z.handle(Tick(), 11.0) == []  # killed already; the guard list is spent
    assert z.handle(Spawn("c", P), 11.0) == [Send(refused("c"))]


def test_exit_of_a_fenced_job_is_reported_fenced():
    z = leased(10.0)
    forked(z, "a", 41)
    z.handle(Tick(), 10.5)
    assert z.handle(ChildReaped(41, -9, 9), 10.6) == [DropCgroup(41),
                                                      Send(Exited("a", 41, -9, 9, True))]


def test_renewed_lease_keeps_jobs_running():
    z = leased(10.0)
    forked(z, "a", 41)
    assert z.handle(Lease(20.0), 9.0) == []
    assert z.handle(Tick(), 15.0) == []
    assert z.handle(Spawn("b", P), 15.0) == [Fork("b", P)]


def test_pending_renewal_read_ahead_counts_before_the_kill():
    z = leased(10.0)
    forked(z, "a", 41)
    assert z.handle(Tick(pending=30.0), 25.0) == []  # stopped, but the peer kept renewing
    assert z.lease_until == 30.0
    assert z.handle(Tick(pending=32.0), 35.0) == [KillJob(41)]  # renewed, not far enough


def test_a_shorter_lease_fences_at_once():
    z = leased(100.0)
    forked(z, "a", 41)
    z.handle(Lease(1.0), 2.0)
    assert z.handle(Tick(), 2.0) == [KillJob(41)]


def test_lease_back_after_the_fence_lets_spawns_run_again():
    z = leased(10.0)
    z.handle(Tick(), 11.0)
    z.handle(Lease(50.0), 12.0)
    assert z.handle(Spawn("k", P), 12.0) == [Fork("k", P)]


def test_guard_replaces_the_list():
    z = leased(10.0)
    z.handle(Guard([1, 2]), 0.0)
    z.handle(Guard(["3"]), 0.0)
    assert z.handle(Tick(), 11.0) == [KillPid(3)]


# ---- children ----------------------------------------------------------------------------

def test_exit_reported_once_with_code_and_signal():
    z = leased()
    forked(z, "a", 41)
    assert z.handle(ChildEnding(41), 2.0) == [KillLeftovers(41)]
    assert z.handle(ChildReaped(41, 3, 0), 2.0) == [DropCgroup(41),
                                                    Send(Exited("a", 41, 3, 0, False))]
    assert z.handle(ChildEnding(41), 2.0) == []
    assert z.handle(ChildReaped(41, 3, 0), 2.0) == []
    assert z.children == {}


def test_a_stranger_child_is_neither_killed_nor_reported():
    z = leased()
    assert z.handle(ChildEnding(99), 1.0) == []
    assert z.handle(ChildReaped(99, 0, 0), 1.0) == []
    assert z.handle(ChildStopped(99), 1.0) == [] and z.paused == set()


def test_stopped_job_continues_once_the_peer_runs_and_the_lease_holds():
    z = leased(10.0)
    forked(z, "a", 41)
    z.handle(ChildStopped(41), 2.0)
    assert z.timeout(2.0) == PAUSED_POLL  # look often while a job waits
    assert z.handle(PeerSeen(False), 2.0) == []  # the peer is stopped: wait
    assert z.handle(PeerSeen(True), 2.0) == [Continue(41)]
    assert z.paused == set() and z.handle(PeerSeen(True), 2.1) == []


def test_stopped_job_is_not_continued_past_the_lease():
    z = leased(10.0)
    forked(z, "a", 41)
    z.handle(ChildStopped(41), 2.0)
    assert z.handle(PeerSeen(True), 10.5) == []
    assert z.handle(Tick(), 10.5) == [KillJob(41)]


def test_reaped_job_is_no_longer_paused():
    z = leased(10.0)
    forked(z, "a", 41)
    z.handle(ChildStopped(41), 2.0)
    z.handle(ChildReaped(41, -9, 9), 2.0)
    assert z.paused == set()


def test_input_closed_exits_killing_what_runs():
    z = leased()
    forked(z, "a", 41)
    forked(z, "b", 42)
    assert z.handle(InputClosed(), 3.0) == [Exit((41, 42))]
    assert z.closed


# ---- what the zygote cannot take: an answer, never a crash ------------------------------

def test_garbled_frame_gets_an_error_answer():
    assert ZygoteState().handle(Garbled("unknown message type 'Nope'"), 0.0) == [
        Send(Error("unknown message type 'Nope'"))]


@pytest.mark.parametrize("msg", [Ready(1), Spawned("k", 1), Exited("k", 1, 0, 0),
                                 Error("x"), object()])
def test_a_message_not_for_the_zygote_gets_an_error_answer(msg):
    [act] = ZygoteState().handle(msg, 0.0)
    assert isinstance(act, Send) and isinstance(act.msg, Error)
    assert type(msg).__name__ in act.msg.reason


def test_unpack_names_what_is_wrong():
    assert unpack(next_frame(pack(Lease(1.0)))[0]) == Lease(1.0)
    with pytest.raises(ProtocolError, match="unknown message type 'Nope'"):
        unpack(msgpack.packb([0, "Nope", {}]))
    with pytest.raises(ProtocolError, match="bad fields for Spawn"):
        unpack(msgpack.packb([0, "Spawn", {"key": "k"}]))
    with pytest.raises(ProtocolError, match="not a message frame"):
        unpack(b"\xc1")


@pytest.mark.parametrize("params, why", [
    (dict(P.to_wire(), cwd="/tmp"), "unknown run params: cwd"),
    ({k: v for k, v in P.to_wire().items() if k != "log_path"}, "missing run params: log_path"),
    ([1, 2], "run params must be a dict"),
])
def test_a_spawn_with_bad_run_params_is_a_protocol_error(params, why):
    """The zygote answers it with Error (Garbled) and carries on: no exception escapes."""
    with pytest.raises(ProtocolError, match=f"bad fields for Spawn: {why}"):
        unpack(msgpack.packb([0, "Spawn", {"key": "k", "params": params}]))


def test_a_spawn_carries_typed_run_params():
    msg = unpack(next_frame(pack(Spawn("k", P)))[0])
    assert isinstance(msg.params, RunParams) and msg == Spawn("k", P)
    assert msgpack.unpackb(next_frame(pack(Spawn("k", P)))[0])[2]["params"] == P.to_wire()


def test_every_message_round_trips():
    for msg in (Spawn("k", P), Lease(2.5), Guard([1, 2]), Ready(3, "n"),
                Spawned("k", 4), Exited("k", 4, -9, 9, True), Error("why")):
        body, rest = next_frame(pack(msg) + b"\x00")
        assert unpack(body) == msg and rest == b"\x00"
    assert next_frame(pack(Lease(1.0))[:-1])[0] is None


# ---- property: no job process outlives the lease ----------------------------------------

EVENTS = st.one_of(
    st.tuples(st.just("lease"), st.floats(0, 40)),
    st.tuples(st.just("spawn"), st.just(0)),
    st.tuples(st.just("exit"), st.integers(0, 5)),
    st.tuples(st.just("stop"), st.integers(0, 5)),
    st.tuples(st.just("peer"), st.booleans()),
    st.tuples(st.just("tick"), st.just(0)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(EVENTS, st.floats(0, 3)), max_size=40))
def test_no_job_process_runs_past_the_lease(steps):
    """A simulated OS performs the actions: after each look at the lease, nothing runs
    (or is continued) past its end, no fork happens past it, and every exit is reported
    once."""
    z, now, alive, pids, reported = ZygoteState(), 0.0, set(), iter(range(100, 10**6)), []

    def run(event):
        for act in z.handle(event, now):
            if isinstance(act, Fork):
                assert not z.lease_ran_out(now)
                pid = next(pids)
                alive.add(pid)
                run(Forked(act.key, pid))
            elif isinstance(act, KillJob):
                alive.discard(act.pid)
            elif isinstance(act, Continue):
                assert not z.lease_ran_out(now)
            elif isinstance(act, Send) and isinstance(act.msg, Exited) and act.msg.pid:
                reported.append(act.msg.pid)

    for (kind, arg), dt in steps:
        now += dt
        if kind == "lease":
            run(Lease(arg))
        elif kind == "spawn":
            run(Spawn(f"k{now}", P))
        elif kind in ("exit", "stop") and z.children:
            pid = sorted(z.children)[arg % len(z.children)]
            if kind == "exit":
                alive.discard(pid)
                run(ChildEnding(pid))
                run(ChildReaped(pid, 0, 0))
            else:
                run(ChildStopped(pid))
        elif kind == "peer":
            run(PeerSeen(arg))
        elif kind == "tick":
            run(Tick())
            if z.lease_ran_out(now):
                assert not alive
    assert len(reported) == len(set(reported))
    assert alive == set(z.children) - z.fenced
