"""Unit tests for raft/commands.py: typed commands and their msgpack codec."""
from __future__ import annotations

import dataclasses

import msgpack
import pytest

from raft import commands as c

SAMPLES = [
    c.RegisterPeer("127.0.0.1:6123", "127.0.0.1", 8081, 6123, 4242, 8, 1700000000.25),
    c.Heartbeat("127.0.0.1:6123", 1700000001.5),
    c.LeaseRound((c.Heartbeat("n1", 3.0), c.Heartbeat("n2", 3.5, ready=False, disk_low="low"))),
    c.DeclarePeerDead("127.0.0.1:6124", 1700000002.0),
    c.SubmitJob("job-1", {"name": "clicks", "entry": "pipelines.clicks:main",
                          "pyfiles": ["/shared/p.zip"], "args": {"input": "/data", "n": 3,
                                                                 "nested": {"a": [1, 2]}},
                          "slots": 2, "sql": None}, 12.5, "req-7"),
    c.SubmitJob("job-2", {}, 0.0),
    c.PurgeJobs(("a", "b"), 3.0),
    c.SubmitJobs((c.SubmitJob("job-3", {"args": {"k": [1, 2]}}, 1.0, "r-3"),
                  c.SubmitJob("job-4", {}, 2.0))),
    c.Assignment("job-1", "n1", 3),
    c.AssignJobs((c.Assignment("job-1", "n1", 0), c.Assignment("job-2", "n2", 5)), 99.0),
    c.AssignJobs((), 1.0),
    c.StatusReport("job-1", 1, "n1", "RUNNING", 5.0),
    c.StatusReport("job-1", 2, "n1", "FINISHED", 6.0, result={"rows": 10, "ok": True}),
    c.StatusReport("job-1", 2, "n1", "FAILED", 6.0,
                   failure={"exception": "ValueError: x", "traceback": "Traceback..."}),
    c.ReportStatuses((c.StatusReport("a", 1, "n1", "RUNNING", 1.0),
                      c.StatusReport("b", 4, "n2", "FAILED", 2.0,
                                     failure={"exception": "E", "traceback": "T"}))),
    c.ReportStatuses(()),
    c.CancelJob("job-1", 77.0),
    c.AddArtifact("sha256:" + "ab" * 32, "lib.zip", 1234, "n1", 3.0),
    c.ForgetArtifacts(("sha256:" + "ab" * 32, "sha256:" + "cd" * 32), 100.0, 3700.0),
    c.RegisterPeer("n3", "127.0.0.1", 8083, 6125, 7, 4, 1.0, weight=2.5, ready=False),
    c.Heartbeat("n3", 2.0, ready=False),
    c.TriggerSavepoint("job-1", "t-1", "/sp", True, 4.0),
    c.TriggerSavepoint("job-1", "t-2", None, False, 4.0),
    c.CompleteSavepoint("job-1", 3, "n1", "t-1", "/sp/savepoint-1", None, 5.0, {"q": 1}),
    c.CompleteSavepoint("job-1", 3, "n1", "t-2", None, "IOError: disk full", 5.0),
    c.Move("job-1", "n1", "n2", 3),
    c.MoveJobs((c.Move("job-1", "n1", "n2", 3), c.Move("job-2", "n1", "n3", 1)), "drain", 6.0),
    c.ReleaseJob("job-1", 3, "n1", 7.0),
    c.DrainPeer("n1", True, 8.0),
    c.DrainPeer("n1", True, 8.0, 30.0),
    c.AdmitPeer("10.0.0.4:8081:6123", 9.0),
    c.RemovePeer("10.0.0.4:6123", 10.0, 60.0),
    c.RetirePeer("10.0.0.4:6123", 11.0),
    c.Barrier(),
    c.OpenConnectSession("0c7a1e2b-0000-4000-8000-000000000009", "127.0.0.1:6123", 6.5,
                         "sales", "ana", "ana-os", 200),
    c.CloseConnectSessions(("0c7a1e2b-0000-4000-8000-000000000009",), "127.0.0.1:6123", 7.5,
                           "idle"),
    c.OpenSqlSession("5f0c1a52-0000-4000-8000-000000000001", "bi",
                     {"spark.sql.shuffle.partitions": "4"}, "127.0.0.1:6123", 1700000009.0, 200),
    c.CloseSqlSessions(("5f0c1a52-0000-4000-8000-000000000001",), 1700000010.0, "idle"),
    c.AddSqlStatement("5f0c1a52-0000-4000-8000-000000000001", "127.0.0.1:6123", 2,
                      "CREATE TEMP VIEW v AS SELECT 1", 1700000011.0),
    c.SqlOperation("5f0c1a52-0000-4000-8000-000000000001", "op-1", "127.0.0.1:6123", 2,
                   "SELECT 1", "read", 1700000012.0),
    c.StartSqlOperations((c.SqlOperation("5f0c1a52-0000-4000-8000-000000000001", "op-2",
                                         "127.0.0.1:6123", 2, "SELECT 2", "read",
                                         1700000013.0),)),
    c.OpenLivySession("5f0c1a52-0000-4000-8000-000000000002", "pyspark", "notebook",
                      {"spark.sql.shuffle.partitions": "4"}, "127.0.0.1:6123", 1700000014.0,
                      200, ("driverMemory: not applied",)),
    c.AddLivyStatement(0, "127.0.0.1:6123", 1, "print(1)", "pyspark", 1700000015.0, "r-1"),
    c.EndLivyStatement(0, 0, "127.0.0.1:6123", 1, "available",
                       {"status": "ok", "execution_count": 0, "data": {"text/plain": "1"}},
                       1700000016.0),
    c.CreateToken("ci-reader", "read", "team-a", "ab" * 32, 1700000017.0),
    c.RevokeToken("ci-reader", 1700000018.0),
    c.SetTenant("team-a", 4, None, 1700000019.0),
    c.PutPipeline("clicks", {"entry": "m:f", "job-type": "streaming"}, "clicks-1",
                  1700000020.0, "team-a", "alice"),
    c.DeletePipeline("clicks", 1700000021.0),
]


def test_every_command_type_has_a_sample():
    assert {type(s).__name__ for s in SAMPLES} == set(c.COMMAND_TYPES)


@pytest.mark.parametrize("command", SAMPLES, ids=lambda s: type(s).__name__)
def test_round_trip_equal(command):
    blob = c.encode(command)
    assert isinstance(blob, bytes)
    back = c.decode(blob)
    assert type(back) is type(command)
    assert back == command


def test_nested_assignments_come_back_as_tuple_of_assignments():
    cmd = c.AssignJobs((c.Assignment("j1", "n1", 0), c.Assignment("j2", "n2", 7)), 10.0)
    back = c.decode(c.encode(cmd))
    assert isinstance(back.assignments, tuple)
    assert [type(a) for a in back.assignments] == [c.Assignment, c.Assignment]
    assert back.assignments[1].expected_epoch == 7
    assert back.assignments[1].node == "n2"
    hash(back)  # frozen dataclass with tuple fields stays hashable


def test_nested_status_reports_come_back_as_tuple_of_reports():
    cmd = c.ReportStatuses((c.StatusReport("j", 3, "n", "FINISHED", 1.0, result=[1, "x"]),))
    back = c.decode(c.encode(cmd))
    assert isinstance(back.reports, tuple)
    assert isinstance(back.reports[0], c.StatusReport)
    assert back.reports[0].result == [1, "x"]
    assert back.reports[0].epoch == 3


@pytest.mark.parametrize("items", [
    (),
    (c.SubmitJob("j", {}, 1.0),),  # a small ext (ext 8)
    (c.SubmitJob("k", {"args": {"x": "y" * 300}}, 1.0, "r"),  # ext 16
     c.SubmitJob("l", {"args": {"x": "y" * 70_000}}, 2.0))])  # ext 32
def test_a_batch_of_packed_items_is_the_batch_of_the_items(items):
    packed = c.SubmitJobs(tuple(c.Packed(c.encode(i)) for i in items))
    assert c.encode(packed) == c.encode(c.SubmitJobs(items))
    assert c.decode(c.encode(packed)) == c.SubmitJobs(items)


@pytest.mark.parametrize("blob", [b"", b"\x92\x01", msgpack.packb(msgpack.ExtType(2, b"x"))])
def test_a_packed_item_that_is_not_an_encoded_command_is_refused(blob):
    with pytest.raises(TypeError):
        c.encode(c.SubmitJobs((c.Packed(blob),)))


def _ext(name, fields):
    """A command on the wire: msgpack ext type 1 holding [name, fields]."""
    return msgpack.ExtType(1, msgpack.packb([name, fields], use_bin_type=True))


def _blob(name, fields):
    return msgpack.packb(_ext(name, fields), use_bin_type=True)


def test_wire_format_is_ext_typed():
    raw = msgpack.unpackb(c.encode(c.Heartbeat("n1", 2.0)), raw=False)
    assert raw == _ext("Heartbeat", {"node": "n1", "time": 2.0, "ready": True,
                                     "disk_low": "", "lacks": []})


def test_decode_missing_optional_fields_uses_defaults():
    blob = _blob("StatusReport", {"job_id": "j", "epoch": 1, "node": "n",
                                  "status": "RUNNING", "time": 1.0})
    back = c.decode(blob)
    assert back == c.StatusReport("j", 1, "n", "RUNNING", 1.0)
    assert back.result is None and back.failure is None


def test_decode_ignores_unknown_fields():
    blob = _blob("Heartbeat", {"node": "n", "time": 1.0, "extra": 5})
    assert c.decode(blob) == c.Heartbeat("n", 1.0)


def test_encode_rejects_non_commands():
    with pytest.raises(TypeError):
        c.encode({"op": "heartbeat"})
    with pytest.raises(TypeError):
        c.encode("Heartbeat")

    @dataclasses.dataclass
    class NotACommand:
        x: int = 1
    with pytest.raises(TypeError):
        c.encode(NotACommand())


@pytest.mark.parametrize("blob", [
    b"",                          # empty
    b"\xc1",                      # reserved msgpack byte
    b"\x92\x01",                  # truncated array
    b"\x01\x02",                  # extra data
    b"not msgpack at all \xff\xfe",
], ids=["empty", "reserved", "truncated", "extra", "text"])
def test_decode_garbage_raises_value_error(blob):
    with pytest.raises(ValueError):
        c.decode(blob)


@pytest.mark.parametrize("payload", [5, "Heartbeat", [1, 2], None, {"node": "n", "time": 1.0},
                                     {"a": {"b": 1}}])
def test_decode_non_command_payload_raises_value_error(payload):
    with pytest.raises(ValueError, match="not a command"):
        c.decode(msgpack.packb(payload))


def test_decode_unknown_type_raises_value_error():
    with pytest.raises(ValueError, match="unknown command type 'DropTables'"):
        c.decode(_blob("DropTables", {"x": 1}))


def test_decode_unknown_nested_type_raises_value_error():
    blob = msgpack.packb(_ext("AssignJobs", {"time": 1.0,
                                             "assignments": [_ext("Bogus", {"job_id": "j"})]}))
    with pytest.raises(ValueError, match="Bogus"):
        c.decode(blob)


def test_decode_missing_required_fields_raises_value_error():
    with pytest.raises(ValueError):
        c.decode(_blob("Heartbeat", {}))


def test_user_dict_with_tag_key_round_trips():
    cmd = c.SubmitJob("j", {"args": {"__t": "Heartbeat", "node": "n", "time": 1.0}}, 1.0)
    assert c.decode(c.encode(cmd)) == cmd


def test_job_result_with_tag_key_does_not_poison_report_batch():
    cmd = c.ReportStatuses((
        c.StatusReport("a", 1, "n", "RUNNING", 1.0),
        c.StatusReport("b", 1, "n", "FINISHED", 1.0, result={"__t": "my-type", "v": 1}),
    ))
    assert c.decode(c.encode(cmd)) == cmd


def _reference(obj):
    """The wire format as plain msgpack writes it: each command an ext whose data is its
    [name, fields], packed by a fresh packb (what encode did before it kept packers)."""
    def default(o):
        if dataclasses.is_dataclass(o) and not isinstance(o, type):
            fields = {f.name: getattr(o, f.name) for f in dataclasses.fields(o)}
            return msgpack.ExtType(1, msgpack.packb([type(o).__name__, fields],
                                                    default=default, use_bin_type=True))
        raise TypeError(type(o).__name__)
    return msgpack.packb(obj, default=default, use_bin_type=True)


@pytest.mark.parametrize("command", SAMPLES, ids=lambda s: type(s).__name__)
def test_encoding_is_plain_nested_msgpack(command):
    assert c.encode(command) == _reference(command)


def test_an_encoding_error_halfway_leaves_later_encodings_right():
    bad = c.SubmitJobs((c.SubmitJob("j1", {"a": 1}, 1.0),
                        c.SubmitJob("j2", {"x": object()}, 2.0)))  # (its item's spec)
    good = c.SubmitJobs((c.SubmitJob("j3", {"args": {"k": [1, 2]}}, 3.0, "r"),))
    for _ in range(3):
        with pytest.raises(TypeError):
            c.encode(bad)
        assert c.encode(good) == _reference(good)
        assert c.decode(c.encode(good)) == good


def test_threads_encoding_at_once_get_their_own_bytes():
    import threading
    batches = [c.SubmitJobs(tuple(c.SubmitJob(f"t{t}-{i}", {"n": i, "args": {"t": t}}, 1.0)
                                  for i in range(20))) for t in range(4)]
    wrong: list = []

    def run(batch):
        want = _reference(batch)
        for _ in range(300):
            if c.encode(batch) != want:
                wrong.append(batch)
                return
    threads = [threading.Thread(target=run, args=(b,)) for b in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []
