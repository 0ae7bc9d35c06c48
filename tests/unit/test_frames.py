"""The one codec of the peer's child-process protocols (jm/runtime/frames.py)."""
import io

import msgpack
import pytest

from jm.runtime import livyproto, sqlproto, zygoteproto
from jm.runtime.frames import Codec, ProtocolError, next_frame, read_frame


def test_tuples_come_back_as_tuples_and_typed_values_as_themselves():
    msg = sqlproto.OpenSession("s", {"a": "1"}, replay=(("SET x=1", "a"),),
                               artifacts=(("file", "/tmp/f"),))
    rid, back = sqlproto.CODEC.unpack(next_frame(sqlproto.CODEC.pack(msg, 7))[0])
    assert (rid, back) == (7, msg) and isinstance(back.replay[0], tuple)


def test_every_protocol_reads_its_own_frames_from_a_stream():
    frames = [sqlproto.CODEC.pack(sqlproto.Fetch("op"), 1),
              livyproto.CODEC.pack(livyproto.Interrupt(3), 2),
              zygoteproto.pack(zygoteproto.Lease(5.0))]
    stream = io.BytesIO(b"".join(frames))
    assert sqlproto.CODEC.unpack(read_frame(stream)) == (1, sqlproto.Fetch("op"))
    assert livyproto.CODEC.unpack(read_frame(stream)) == (2, livyproto.Interrupt(3))
    assert zygoteproto.unpack(read_frame(stream)) == zygoteproto.Lease(5.0)
    assert read_frame(stream) is None


def test_a_message_of_another_protocol_is_refused_both_ways():
    with pytest.raises(TypeError, match="not a message of this protocol"):
        sqlproto.CODEC.pack(livyproto.Interrupt(3), 1)
    body = next_frame(livyproto.CODEC.pack(livyproto.Interrupt(3), 1))[0]
    with pytest.raises(ProtocolError, match="unknown message type 'Interrupt'"):
        sqlproto.CODEC.unpack(body)


@pytest.mark.parametrize("body, why", [
    (b"\xc1", "not a message frame"),
    (msgpack.packb(["Fetch", {}]), "not a message frame"),          # (no request id)
    (msgpack.packb([1, "Fetch", ["op"]]), "bad fields for Fetch: not a map"),
    (msgpack.packb([1, "Fetch", {"op": "o", "rows": 3}]), "bad fields for Fetch"),
    (msgpack.packb([1, "Fetch", {}]), "bad fields for Fetch"),
])
def test_a_frame_that_is_no_message_says_why(body, why):
    with pytest.raises(ProtocolError, match=why):
        Codec(sqlproto.Fetch).unpack(body)


def test_a_bad_frame_on_a_child_s_stdin_is_skipped_and_reading_goes_on(capsys):
    bad = msgpack.packb([1, "Nope", {}])
    good = sqlproto.CODEC.pack(sqlproto.Cancel("op"), 2)
    stream = io.BytesIO(len(bad).to_bytes(4, "big") + bad + good)
    assert list(sqlproto.CODEC.requests(stream)) == [(2, sqlproto.Cancel("op"))]
    assert "unknown message type 'Nope'" in capsys.readouterr().err
