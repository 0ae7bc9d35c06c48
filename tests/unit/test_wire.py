"""raft/wire.py: what may come off the Raft wire. The restricted unpickler refuses a
payload that would run code and reads what pysyncobj really sends (messages, log
entries, membership changes, snapshots); frames and unpacked sizes are capped; the
accept and admission decisions."""
import errno
import gzip
import io
import os
import pickle
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from pysyncobj import pickle as ppickle
from pysyncobj.node import TCPNode

from raft import wire
from raft.commands import SubmitJob, encode
from raft.records import (ArtifactRecord, AttemptRecord, JobRecord, PeerRecord,
                          SavepointRecord)
from raft.state import ClusterState
from tests.unit.test_state_properties import SEQUENCE, state_snapshot, to_command


class _Evil:
    """Unpickling this runs os.system (the classic pickle exploit)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


class _EvilEval:
    def __reduce__(self):
        return (eval, ("1 + 1",))


def _payloads(path: str) -> list[bytes]:
    return [pickle.dumps(_Evil(path), p) for p in (0, 2, 4, 5)] + [
        pickle.dumps({"type": "append_entries", "entries": [_Evil(path)]}, 2),
        pickle.dumps(_EvilEval(), 2),
    ]


@pytest.mark.parametrize("allowed,state", [(wire.WIRE_NAMES, False),
                                           (wire.COMMAND_NAMES, False),
                                           (wire.SNAPSHOT_NAMES, True)])
def test_a_payload_that_would_run_code_is_refused(tmp_path, allowed, state):
    path = tmp_path / "pwned"
    for data in _payloads(str(path)):
        with pytest.raises(wire.WireError, match="refused to unpickle"):
            wire.loads(data, allowed, state)
    assert not path.exists()
    # the same payload through pickle itself runs the command (the test sees the danger)
    pickle.loads(_payloads(str(path))[1])
    assert path.exists()


def test_the_stand_ins_do_only_what_protocol_2_needs():
    with pytest.raises(wire.WireError):
        wire._latin1("x", "zlib")  # a codec other than latin1 (bytes-to-bytes: a bomb)
    with pytest.raises(wire.WireError):
        wire._latin1(b"x")
    with pytest.raises(wire.WireError):
        wire._empty_bytes(10 ** 10)  # bytes(10**10) would take 10 GB
    assert wire._latin1("\xff\x00") == b"\xff\x00" and wire._empty_bytes() == b""
    # `bytes(n)` smuggled through a pickle: refused, nothing allocated
    data = b"\x80\x02c__builtin__\nbytes\nJ\x00\xe4\x0bT\x85R."
    with pytest.raises(wire.WireError, match="without arguments"):
        wire.loads(data)


def test_state_classes_only_from_the_state_modules():
    assert wire.state_class("raft.records", "JobRecord") is JobRecord
    assert wire.state_class("raft.state", "ClusterState") is ClusterState
    assert wire.state_class("raft.commands", "encode") is None  # a function
    assert wire.state_class("raft.records", "field") is None    # an import
    assert wire.state_class("raft.journal", "DurableJournal") is None  # opens files
    assert wire.state_class("raft.node", "RaftHost") is None
    assert wire.state_class("os", "system") is None


def _messages() -> list:
    """Every kind of message pysyncobj sends (syncobj.py), as it builds them."""
    entry = (b"\x00" + ppickle.dumps((0, (encode(SubmitJob("j", {"a": 1}, 1.0)),), {})), 7, 2)
    return [
        {"type": "request_vote", "term": 3, "last_log_term": 2, "last_log_index": 9},
        {"type": "response_vote", "term": 3},
        {"type": "append_entries", "term": 3, "commit_index": 5, "entries": [entry, entry],
         "prevLogIdx": 6, "prevLogTerm": 2},
        {"type": "append_entries", "term": 3, "commit_index": 5, "transmission": "start",
         "data": b"\x00" * 100, "prevLogIdx": 6, "prevLogTerm": 2},
        {"type": "append_entries", "term": 3, "commit_index": 5,
         "serialized": (b"\x1f\x8b" + b"x" * 50, True, False)},
        {"type": "append_entries", "term": 3, "commit_index": 5, "serialized": None},
        {"type": "apply_command", "command": entry[0], "request_id": 4},
        {"type": "apply_command_response", "request_id": 4, "log_idx": 8, "log_term": 3},
        {"type": "apply_command_response", "request_id": 4, "error": 2},
        {"type": "next_node_idx", "next_node_idx": 8, "reset": False, "success": True},
        {"type": "timeout_now", "term": 3},
        "127.0.0.1:4321", os.urandom(32), (os.urandom(32), {"type": "timeout_now", "term": 1}),
        b"", {},
    ]


@pytest.mark.parametrize("protocol", [2, wire.SEND_PROTOCOL])
def test_real_messages_are_read(protocol):
    for m in _messages():
        data = zlib.compress(pickle.dumps(m, protocol), 3)
        assert wire.unpack(data, 1 << 20) == m
        assert wire.unpack(wire.pack(m), 1 << 20) == m
        if isinstance(m, dict) and m:
            assert wire.message_error(m) is None, m
        else:  # a handshake (an address, a key) or nothing: not a Raft message
            assert wire.message_error(m) is not None, m


def test_log_entries_and_membership_changes_are_read():
    node = TCPNode("127.0.0.1:4000")
    change = wire.loads(ppickle.dumps(["add", node.id, node]), wire.COMMAND_NAMES)
    assert change[:2] == ["add", "127.0.0.1:4000"] and change[2] == node
    assert change[2].port == 4000
    with pytest.raises(wire.WireError):  # a node in a plain message: not expected there
        wire.loads(ppickle.dumps(node))
    command = (0, (b"blob",), {})
    assert wire.loads(ppickle.dumps(command), wire.COMMAND_NAMES) == command
    assert wire.loads(ppickle.dumps(3), wire.COMMAND_NAMES) == 3  # a code version


def test_a_snapshot_is_read():
    state = ClusterState()
    state.peers["a"] = PeerRecord("a", "h", 1, 2, 3, 4)
    job = JobRecord("j", "name", {"slots": 1}, 1.0, node="a")
    job.attempts.append(AttemptRecord(1, "a", 1.0, spark=["app-1"]))
    job.savepoints["s"] = SavepointRecord("s", False, None, 2.0)
    state.jobs["j"] = job
    state.artifacts["x"] = ArtifactRecord("x", "x.py", 3, ["a"], 1.0)
    state.applied = 12
    node = TCPNode("127.0.0.1:4000")
    snapshot = ([{}, {"state": state}], (b"\x00x", 12, 3), (b"\x00y", 11, 3), {node})
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb") as g:
        ppickle.dump(snapshot, g)  # as pysyncobj's serializer writes raft.dump
    with gzip.GzipFile(fileobj=io.BytesIO(buf.getvalue())) as g:
        data = wire.load(g)
    got = data[0][1]["state"]
    assert got.jobs["j"] == state.jobs["j"] and got.peers == state.peers
    assert got.artifacts == state.artifacts and got.jobs["j"].attempts[0].spark == ["app-1"]
    assert got.applied == 12 and data[3] == {node}


def test_frames_and_unpacked_sizes_are_capped():
    assert wire.frame_error(100, 1000) is None
    assert "raft.max-message-size" in wire.frame_error(2 ** 31 - 1, 1000)
    assert wire.frame_error(0, 1000) and wire.frame_error(-5, 1000)
    assert "which member" in wire.frame_error(70000, wire.HANDSHAKE_LIMIT, member=False)
    bomb = zlib.compress(pickle.dumps(b"\x00" * (10 << 20), 4), 9)  # 10 MB in ~10 KB
    assert len(bomb) < 20000
    with pytest.raises(wire.WireError, match="raft.max-message-size"):
        wire.unpack(bomb, 1 << 20)
    with pytest.raises(wire.WireError, match="zlib"):
        wire.unpack(b"not zlib at all", 1 << 20)
    with pytest.raises(wire.WireError, match="truncated"):
        wire.unpack(zlib.compress(pickle.dumps("x" * 1000))[:-8], 1 << 20)


def test_messages_and_handshakes():
    assert wire.message_error({"type": "append_entries"}) is None
    assert "unknown type" in wire.message_error({"type": "rm -rf"})
    assert "not a dict" in wire.message_error(["add", "x:1"])
    members = {"127.0.0.1:1", "127.0.0.1:2"}
    assert wire.handshake_error("127.0.0.1:1", False, members) is None
    assert "utility" in wire.handshake_error(["remove", "127.0.0.1:2"], False, members)
    # a non-voting member (with raft.password, only after the key exchange)
    assert wire.handshake_error("readonly", False, members) is None
    assert "unknown member" in wire.handshake_error("10.0.0.1:1", False, members)
    assert "unknown member" in wire.handshake_error({"type": "x"}, False, members)
    assert wire.handshake_error(os.urandom(32), True, members) is None
    assert "random key" in wire.handshake_error("127.0.0.1:1", True, members)
    # members connect one way: a claim to be one this member connects to is not theirs
    assert "connects to itself" in wire.handshake_error("127.0.0.1:1", False, members,
                                                        {"127.0.0.1:1"})
    assert wire.handshake_error("127.0.0.1:2", False, members, {"127.0.0.1:1"}) is None


def test_accept_errors_never_close_the_listener():
    assert wire.accept_error_action(errno.EAGAIN) == "again"
    for code in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
        assert wire.accept_error_action(code) == "backoff"
    for code in (errno.ECONNABORTED, errno.EPROTO, errno.EPERM, None):
        assert wire.accept_error_action(code) == "skip"
    waits = [wire.next_backoff(0.0)]
    for _ in range(8):
        waits.append(wire.next_backoff(waits[-1]))
    assert waits[0] == 0.05 and waits[-1] == 1.0 and waits == sorted(waits)


def test_admission():
    assert wire.max_connections(0, 3) == 16 and wire.max_connections(0, 7) == 28
    assert wire.max_connections(5, 3) == 5
    assert wire.admit([], 2, 4) == (True, 0)
    assert wire.admit([1.0], 2, 4) == (True, 0)
    assert wire.admit([3.0, 1.0], 2, 4) == (True, 1)      # the oldest unidentified goes
    assert wire.admit([3.0, 1.0, 0.5], 1, 4) == (True, 1)
    assert wire.admit([], 4, 4) == (False, 0)            # members only: the new one goes
    assert wire.admit([1.0], 5, 4) == (False, 0)


def test_the_config_keys():
    from jm.config import Config, ConfigError
    conf = Config({}, home="/tmp")
    assert conf["raft.max-message-size"] == 256 * 1024 * 1024
    assert conf["raft.max-connections"] == 0 and conf["rest.max-connections"] == 1000
    with pytest.raises(ConfigError, match="raft.max-message-size"):
        Config({"raft.max-message-size": "64 kb"}, home="/tmp")
    from jm.cluster.members.membership import raft_settings
    settings = raft_settings(Config({"raft.max-connections": 9,
                                     "raft.max-message-size": "8 mb"}, home="/tmp"))
    assert settings.max_connections == 9 and settings.max_message_size == 8 * 1024 * 1024



@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(SEQUENCE)
def test_any_replicated_state_is_read_back_from_a_snapshot(actions):
    """Whatever the state holds after random commands, the snapshot unpickler reads it:
    a type added to the state that it does not know would fail here, not in a member
    that can no longer load its raft.dump."""
    st = ClusterState()
    for n, action in enumerate(actions):
        st.apply(to_command(st, action, float(n + 1)))
    for protocol in (2, wire.SEND_PROTOCOL):
        data = pickle.dumps(([{}, {"state": st}], (b"\x00x", 2, 1), (b"\x00y", 1, 1),
                             {TCPNode("127.0.0.1:1")}), protocol)
        got = wire.loads(data, wire.SNAPSHOT_NAMES, state_classes=True)[0][1]["state"]
        assert state_snapshot(got) == state_snapshot(st)


def test_connection_admission_per_source_and_the_peers_share():
    from rest.connlimit import admit, peer_reserve
    assert peer_reserve(1000) == 100 and peer_reserve(20) == 8 and peer_reserve(0) == 0
    assert peer_reserve(10) == 5  # never more than half
    assert admit(0, 0, False, 1000, 250) is None
    assert "rest.max-connections-per-source" in admit(300, 250, False, 1000, 250)
    assert admit(300, 250, True, 1000, 250) is None            # peers: no per-source cap
    assert "kept for the cluster's peers" in admit(900, 10, False, 1000, 250)
    assert admit(900, 10, True, 1000, 250) is None             # ... which peers may use
    assert "rest.max-connections," in admit(1000, 0, True, 1000, 250)  # the whole limit
    assert admit(5000, 5000, False, 0, 0) is None              # no caps at all


def test_a_command_re_exported_by_raft_commands_resolves_there_too():
    from raft.commands_sessions import SqlOperation
    assert wire.state_class("raft.commands", "SqlOperation") is SqlOperation
    assert wire.state_class("raft.commands_sessions", "SqlOperation") is SqlOperation
    assert wire.state_class("raft.commands", "Any") is None  # (a typing import)


def test_a_state_with_every_kind_of_record_is_read_back_from_a_snapshot():
    """Every record type the state can hold, tenants' and pipelines' too (the random
    sequences above make jobs and peers only): a type whose module the unpickler does not
    know would leave a member unable to load its snapshot."""
    from raft import commands as c
    st = ClusterState()
    cmds = [c.RegisterPeer("n1", "h", 1, 2, 3, 4, 1.0),
            c.SubmitJob("j1", {"jobid": "j1", "name": "x", "entry": "m:f"}, 1.0),
            c.AddArtifact("sha256:" + "a" * 64, "lib.zip", 1, "n1", 1.0, ("t",), "bob"),
            c.CreateToken("ci", "read", "t", "b" * 64, 1.0),
            c.SetTenant("t", 2, 1, 1.0),
            c.PutPipeline("p", {"entry": "m:f", "job-type": "streaming"}, "j2", 1.0, "t"),
            c.OpenSqlSession("s1", "x", {}, "n1", 1.0),
            c.OpenLivySession("s2", "pyspark", "y", {}, "n1", 1.0)]
    for cmd in cmds:
        assert st.apply(cmd).ok, cmd
    assert st.tenants and st.pipelines and st.tokens and st.livy_ids and st.artifacts
    data = pickle.dumps(([{}, {"state": st}],), wire.SEND_PROTOCOL)
    got = wire.loads(data, wire.SNAPSHOT_NAMES, state_classes=True)[0][1]["state"]
    assert state_snapshot(got) == state_snapshot(st)
