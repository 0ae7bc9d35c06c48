"""jm.cluster.api.audit: requests without credentials counted per source (RefusedTally, pure),
the log's rotation keeping rest.audit.max-files files, and the syslog sink (a real UDP
socket on 127.0.0.1)."""
import json
import socket

import pytest

from jm.cluster.api.audit import AuditLog, RefusedTally, syslog_sink
from jm.configvalues import syslog_address


def test_a_source_s_first_refusal_is_written_and_the_rest_counted_per_window():
    t = RefusedTally(window=60, max_sources=2)
    assert t.refused("10.0.0.1", 0.0) == [
        {"unauthenticated": 1, "remote": "10.0.0.1", "status": 401, "seconds": 0.0}]
    assert [t.refused("10.0.0.1", i / 100) for i in range(1, 1001)] == [[]] * 1000
    assert t.due(59.0) == []
    # the window is over: its count is written at the next request, whoever sends it
    assert t.due(61.0) == [
        {"unauthenticated": 1000, "remote": "10.0.0.1", "status": 401, "seconds": 61.0}]
    assert t.due(200.0) == []  # written once
    # a source seen again after its window starts a new one (its first written at once)
    assert t.refused("10.0.0.1", 300.0)[0]["unauthenticated"] == 1
    # beyond max_sources, new sources count as "other"
    t.refused("10.0.0.2", 301.0)
    assert t.refused("10.0.0.3", 302.0)[0]["remote"] == "other"
    assert t.refused("10.0.0.4", 303.0) == []
    assert {e["remote"] for e in t.due(400.0)} == {"other"}


def test_the_log_rotates_keeping_max_files_and_reads_them_all_oldest_first(tmp_path,
                                                                           monkeypatch):
    import jm.cluster.api.audit as A
    monkeypatch.setattr(A, "MAX_BYTES", 200)
    log = AuditLog(str(tmp_path), max_files=2)
    for i in range(40):
        log.write({"n": i, "pad": "x" * 40})
    log.write({"n": 40})
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["audit.log", "audit.log.1", "audit.log.2"]  # no .3
    got = [e["n"] for e in log.read(1000, lambda e: True)]
    assert got == sorted(got) and got[-1] == 40 and got[0] > 0  # the oldest dropped
    assert len(got) >= 6  # three files of ~3 entries each
    log.close()


def test_entries_go_to_syslog_too():
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.settimeout(10)
    try:
        sink = syslog_sink(f"udp://127.0.0.1:{rx.getsockname()[1]}")
        log = AuditLog("/nonexistent/dir", sink=sink)  # (the file cannot be written)
        log.write({"who": "ops", "path": "/tokens", "status": 201})
        msg = rx.recv(65536).decode()
        log.close()
    finally:
        rx.close()
    assert msg.startswith("<38>jobmanager-audit: ")  # facility auth (4) * 8 + info (6)
    assert json.loads(msg.split(": ", 1)[1].rstrip("\x00")) == {
        "who": "ops", "path": "/tokens", "status": 201}


@pytest.mark.parametrize("bad", ["127.0.0.1:514", "udp://127.0.0.1", "udp://:514",
                                 "udp://h:99999", "tcp://h:514", "dev/log"])
def test_a_syslog_address_is_udp_or_a_socket_path(bad):
    assert syslog_address("udp://127.0.0.1:514") == ("127.0.0.1", 514)
    assert syslog_address("udp://[::1]:514") == ("::1", 514)
    assert syslog_address("/dev/log") == "/dev/log"
    with pytest.raises(ValueError, match="neither udp://host:port nor"):
        syslog_address(bad)


def test_an_entry_s_job_and_time_are_read_as_json_would():
    import json
    from datetime import datetime, timezone

    from rest.tenants import _made_job, stamp
    for body in (b'{"jobid": "abc"}', b'{"jobid":"a-1","x":1}', b'{"x": 1, "jobid": "z"}',
                 b'{"jobid": "a\\"b"}', b'{"jobid": 5}', b'["jobid"]', b'{"jobid": "u\\u00e9"}',
                 b'not json "jobid"'):
        try:
            made = json.loads(body)
        except ValueError:
            made = None
        want = made["jobid"] if isinstance(made, dict) and isinstance(made.get("jobid"), str) \
            else None
        assert _made_job(body) == want, body
    for now in (0.0, 1764745278.9996, 1764745278.5, 1764745279.0004):
        want = datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="milliseconds")
        assert stamp(now) == want.replace("+00:00", "Z"), now
