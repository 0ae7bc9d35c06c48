"""jm/policy/members/stopdrain.py: what a peer told to stop does about its jobs (pure), and the
drain record's `by_stop` (raft/state.py): the peer ends its own stop's drain, never an
operator's."""
import pytest

from jm.policy.members import stopdrain as sd
from jm.policy.members.stopdrain import DRAIN, SKIP, WAIT, SelfView, StopMarker, StopView
from raft.commands import DrainPeer, RegisterPeer, decode, encode
from raft.state import ClusterState


def me(jobs=2, alive=True, draining=False, by_stop=False, leaving=False, deadline=None):
    return SelfView(alive, draining, by_stop, leaving, jobs, deadline)


def view(m=None, leader=True, lease=True, targets=2):
    return StopView(me() if m is None else m, leader, lease, targets)


@pytest.mark.parametrize("v,deadline,action,why", [
    (view(), 60, DRAIN, "drains itself"),
    (view(me(jobs=0)), 60, DRAIN, "drains itself"),  # nothing is placed on it meanwhile
    (view(), 0, SKIP, "drain-deadline is 0"),
    (view(leader=False), 60, SKIP, "no Raft leader"),
    (view(lease=False), 60, SKIP, "no Raft majority"),
    (view(targets=0), 60, SKIP, "no other live peer"),
    (view(me(jobs=0), targets=0), 60, SKIP, "only live peer"),
    (StopView(None, True, True, 2), 60, SKIP, "not a live registered peer"),
    (view(me(alive=False)), 60, SKIP, "not a live registered peer"),
    (view(me(draining=True)), 60, WAIT, "drained already"),
    (view(me(draining=True, leaving=True)), 60, WAIT, "being removed"),
])
def test_how_to_stop(v, deadline, action, why):
    d = sd.how_to_stop(v, deadline)
    assert d.action == action and why in d.reason


@pytest.mark.parametrize("v,now,done,why", [
    (view(me(jobs=0, draining=True)), 0, True, "drained"),
    (StopView(None, True, True, 2), 0, True, "drained"),  # retired: holds nothing
    (view(me(draining=True)), 0, False, ""),
    (view(me(draining=True)), 10, True, "deadline passed"),
    (view(me(draining=True), lease=False), 0, True, "lost its lease"),
    (view(me(draining=True), targets=0), 0, True, "no other live peer"),
    (view(me(draining=False)), 0, True, "drain was ended"),
    (view(me(draining=True, alive=False)), 0, True, "declared dead"),
    (view(me(draining=True), leader=False), 0, False, ""),  # an election: go on waiting
])
def test_progress(v, now, done, why):
    step = sd.progress(v, now, until=10)
    assert step.done == done and why in step.reason


def test_budgets():
    assert sd.wait_budget(0, 3) == 0
    assert sd.wait_budget(60, 3) == 60 + 3 + sd.MOVE_MARGIN
    assert sd.stop_grace(60, 3) > sd.wait_budget(60, 3) + sd.STOP_TIMEOUT
    assert sd.stop_grace(0, 3) == sd.STOP_TIMEOUT + sd.EXIT_MARGIN


def test_should_undrain_only_its_own_stop():
    assert sd.should_undrain(me(draining=True, by_stop=True))
    assert not sd.should_undrain(me(draining=True))             # an operator's drain
    assert not sd.should_undrain(me(draining=True, by_stop=True, leaving=True))
    assert not sd.should_undrain(me())
    assert not sd.should_undrain(None)


def test_a_marker_tells_a_stop_drain_an_older_protocol_recorded_as_an_operators():
    mine = StopMarker(60.0)
    assert sd.should_undrain(me(draining=True, deadline=60.0), mine)
    assert not sd.should_undrain(me(draining=True, deadline=None), mine)  # an operator's since
    assert not sd.should_undrain(me(draining=True, deadline=30.0), mine)
    assert not sd.should_undrain(me(draining=True, deadline=60.0), None)
    assert not sd.should_undrain(me(draining=True, deadline=60.0, leaving=True), mine)
    assert not sd.should_undrain(me(deadline=None), mine)  # the drain was never committed
    assert not sd.should_undrain(None, mine)


def _state():
    st = ClusterState()
    assert st.apply(RegisterPeer("a:1", "a", 1, 1, 10, 4, 1.0)).ok
    return st


def test_the_record_tells_a_stop_drain_from_an_operators():
    st = _state()
    assert st.apply(DrainPeer("a:1", True, 2.0, 60.0, by_stop=True)).ok
    assert st.peers["a:1"].draining and st.peers["a:1"].drain_by_stop
    assert st.apply(DrainPeer("a:1", True, 3.0, None)).ok  # the operator's drain wins
    assert st.peers["a:1"].draining and not st.peers["a:1"].drain_by_stop
    assert st.apply(DrainPeer("a:1", False, 4.0)).ok
    assert not st.peers["a:1"].draining and not st.peers["a:1"].drain_by_stop


def test_a_cluster_below_protocol_2_drops_by_stop():
    from raft import protocol
    assert not protocol.keeps("DrainPeer", "by_stop", 1)
    assert protocol.keeps("DrainPeer", "by_stop", protocol.PROTOCOL)
    assert protocol.keeps("DrainPeer", "deadline", 1)  # (as old as the command)
    st = _state()
    st.protocol = 1
    assert st.apply(DrainPeer("a:1", True, 2.0, 60.0, by_stop=True)).ok
    assert st.peers["a:1"].draining and not st.peers["a:1"].drain_by_stop


def test_by_stop_survives_the_codec_and_defaults_for_older_commands():
    cmd = DrainPeer("a:1", True, 2.0, 60.0, by_stop=True)
    assert decode(encode(cmd)) == cmd
    import msgpack
    from raft import commands as c
    old = msgpack.packb(msgpack.ExtType(c._EXT_COMMAND, msgpack.packb(
        ["DrainPeer", {"node": "a:1", "drain": True, "time": 2.0, "deadline": None}])))
    assert decode(old) == DrainPeer("a:1", True, 2.0, None, False)


def test_an_older_snapshots_peer_record_reads_false():
    st = _state()
    del st.peers["a:1"].__dict__["drain_by_stop"]  # pickled before the field existed
    assert st.peers["a:1"].drain_by_stop is False


def test_a_stop_neither_takes_over_nor_ends_an_operators_drain():
    st = _state()
    assert st.apply(DrainPeer("a:1", True, 2.0, None)).ok  # the operator's
    # the peer's stop, applied after it (its replica had not seen the operator's drain)
    assert st.apply(DrainPeer("a:1", True, 3.0, 60.0, by_stop=True)).ok
    p = st.peers["a:1"]
    assert p.draining and not p.drain_by_stop and p.drain_deadline is None
    # restarted, it ends only its own stop's drain
    assert st.apply(DrainPeer("a:1", False, 4.0, by_stop=True)).ok
    assert p.draining and not p.drain_by_stop
    # its own stop's drain it ends
    assert st.apply(DrainPeer("a:1", False, 5.0)).ok
    assert st.apply(DrainPeer("a:1", True, 6.0, 60.0, by_stop=True)).ok
    assert p.drain_by_stop
    assert st.apply(DrainPeer("a:1", False, 7.0, by_stop=True)).ok
    assert not p.draining and not p.drain_by_stop


def test_the_marker_is_read_only_from_a_small_regular_file(tmp_path):
    """stop-drain.json: a FIFO there would hang the peer's start (open and read), /dev/zero
    behind a symbolic link would run it out of memory: neither is read, nor a big file."""
    import os
    from jm.cluster.members.stopdrain import MARKER, read_marker
    peer = str(tmp_path)  # (its data dir)
    path = tmp_path / MARKER
    assert read_marker(peer) is None
    path.write_text('{"deadline": 12.5}')
    assert read_marker(peer) == StopMarker(12.5)
    path.write_text('{"deadline": null}')
    assert read_marker(peer) == StopMarker(None)
    path.write_text('{"deadline": "soon"}')
    assert read_marker(peer) is None
    path.write_text('{"deadline": 1}' + " " * 10_000)
    assert read_marker(peer) is None
    path.unlink()
    os.mkfifo(path)  # nobody writes it: an open or read would wait forever
    assert read_marker(peer) is None
    path.unlink()
    path.symlink_to("/dev/zero")
    assert read_marker(peer) is None
