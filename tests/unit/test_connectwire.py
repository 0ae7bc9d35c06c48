"""The Connect endpoint's reading of Spark Connect requests, against pyspark's own
messages (jm/policy/spark/connectwire.py)."""
from __future__ import annotations

import pytest

from jm.policy.spark import connectwire as W

pb = pytest.importorskip("pyspark.sql.connect.proto.base_pb2")


def test_the_method_table_is_sparks_service():
    service = pb.DESCRIPTOR.services_by_name["SparkConnectService"]
    theirs = {m.name: (m.client_streaming, m.server_streaming) for m in service.methods}
    ours = {m.name: (m.client_streaming, m.server_streaming) for m in W.METHODS.values()}
    assert ours == theirs
    assert service.full_name == W.SERVICE
    for m in service.methods:  # every request names its session in fields 1 and 2
        fields = {f.name: f.number for f in m.input_type.fields}
        assert fields["session_id"] == W.SESSION_ID and fields["user_context"] == W.USER_CONTEXT


def test_reads_the_session_of_a_large_plan_from_its_first_bytes():
    req = pb.ExecutePlanRequest(session_id="4f1c-e", user_context=pb.UserContext(
        user_id="ana", user_name="Ana"), operation_id="op-1", client_type="pyspark")
    req.plan.root.sql.query = "SELECT " + "x, " * 200_000 + "1"
    raw = req.SerializeToString()
    assert W.session_of(raw) == W.SessionRef("4f1c-e", "ana")
    assert W.session_of(raw[:40]) == W.SessionRef("4f1c-e", "ana")  # (no more is read)


@pytest.mark.parametrize("cls", ["AnalyzePlanRequest", "ConfigRequest", "AddArtifactsRequest",
                                 "ReleaseSessionRequest", "InterruptRequest"])
def test_every_kind_of_request(cls):
    req = getattr(pb, cls)(session_id="s-1", user_context=pb.UserContext(user_id="u"))
    assert W.session_of(req.SerializeToString()) == W.SessionRef("s-1", "u")


def test_a_request_without_a_session_or_a_user():
    assert W.session_of(pb.ConfigRequest().SerializeToString()) is None
    assert W.session_of(b"") is None
    raw = pb.ConfigRequest(session_id="only").SerializeToString()
    assert W.session_of(raw) == W.SessionRef("only", "")


@pytest.mark.parametrize("raw", [b"\x0a\x05ab", b"\x0a", b"\x0b\x01", b"\x02\x01",
                                 b"\x0a\x02\xff\xfe", b"\xff" * 12])
def test_bytes_that_are_no_request(raw):
    with pytest.raises(W.NotARequest):
        W.session_of(raw)


def test_the_release_request_is_one_spark_reads():
    raw = W.release_request("s-9", "bo")
    req = pb.ReleaseSessionRequest.FromString(raw)
    assert (req.session_id, req.user_context.user_id) == ("s-9", "bo")
    assert W.session_of(raw) == W.SessionRef("s-9", "bo")
    assert pb.ReleaseSessionRequest.FromString(W.release_request("s")).session_id == "s"
