"""jm.policy.members.security: when a peer may start, the peer credential,
Host/Origin/Content-Type."""
import pytest

from jm.policy.members import security as sec
from rest import guard


def no_dns(name):
    return []


def resolver(table):
    return lambda name: table.get(name, [])


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.5", "::1", "[::1]", "localhost"])
def test_loopback_hosts(host):
    assert sec.is_loopback(host, no_dns)


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.1", "192.168.1.4", "::", ""])
def test_other_hosts(host):
    assert not sec.is_loopback(host, no_dns)


def test_a_name_is_loopback_only_if_every_address_is():
    r = resolver({"me": ["127.0.1.1"], "both": ["127.0.0.1", "10.1.1.1"]})
    assert sec.is_loopback("me", r)
    assert not sec.is_loopback("both", r)
    assert not sec.is_loopback("unknown", r)


def test_loopback_needs_nothing():
    assert sec.start_refusal(["127.0.0.1"], None, None, None, False, no_dns) == (None, [])


def test_exposed_without_token_or_secret_is_refused_naming_the_keys():
    why, warnings = sec.start_refusal(["10.0.0.1", "127.0.0.1"], None, None, None, False, no_dns)
    assert why and "10.0.0.1" in why and "rest.auth.token" in why and "cluster.secret" in why
    assert "security.insecure" in why and warnings == []
    why, _ = sec.start_refusal(["0.0.0.0"], "tok", None, None, False, no_dns)
    assert "cluster.secret" in why and "rest.auth.token" not in why
    why, _ = sec.start_refusal(["0.0.0.0"], None, "s", None, False, no_dns)
    assert "rest.auth.token" in why and "cluster.secret" not in why


def test_exposed_with_both_starts_and_raft_password_counts_as_the_secret():
    assert sec.start_refusal(["10.0.0.1"], "tok", "s", None, False, no_dns) == (None, [])
    assert sec.start_refusal(["10.0.0.1"], "tok", None, "pw", False, no_dns) == (None, [])


def test_insecure_overrides_loudly():
    why, warnings = sec.start_refusal(["10.0.0.1"], None, None, None, True, no_dns)
    assert why is None and len(warnings) == 1 and "INSECURE" in warnings[0]


def test_peer_credential_is_derived_and_stable():
    a = sec.peer_credential("s3cret")
    assert a == sec.peer_credential("s3cret") and a != sec.peer_credential("other")
    assert "s3cret" not in a and a.startswith(sec.PEER_CREDENTIAL_PREFIX)


def test_allowed_hosts():
    names = guard.allowed_hosts([], ["node-a.example", "10.0.0.1"])
    assert guard.host_allowed("node-a.example:8081", names)
    assert guard.host_allowed("localhost:8081", names)
    assert guard.host_allowed("127.0.0.1:8081", names)
    assert guard.host_allowed("[::1]:8081", names)
    assert guard.host_allowed("10.9.9.9:8081", names)  # a literal address is no rebinding
    assert not guard.host_allowed("evil.example:8081", names)
    assert not guard.host_allowed("EVIL.example", names)
    assert guard.host_allowed("lb.example:443", guard.allowed_hosts(["lb.example"], []))
    assert guard.allowed_hosts(["*"], ["x"]) is None
    assert guard.host_allowed("anything:1", None)


def test_origin():
    assert guard.origin_allowed(None, "127.0.0.1:8081", [])
    assert guard.origin_allowed("http://127.0.0.1:8081", "127.0.0.1:8081", [])
    assert not guard.origin_allowed("http://127.0.0.1:9999", "127.0.0.1:8081", [])
    assert not guard.origin_allowed("https://evil.example", "127.0.0.1:8081", [])
    assert not guard.origin_allowed("null", "127.0.0.1:8081", [])
    assert guard.origin_allowed("https://ui.example/", "127.0.0.1:8081", ["https://ui.example"])
    assert guard.origin_allowed("https://evil.example", "127.0.0.1:8081", ["*"])


@pytest.mark.parametrize("ctype,ok", [
    ("application/json", True), ("application/json; charset=utf-8", True),
    ("Application/JSON", True), ("application/vnd.api+json", True),
    ("text/plain", False), ("application/x-www-form-urlencoded", False),
    ("multipart/form-data; boundary=x", False), ("", False), (None, False)])
def test_json_content_type(ctype, ok):
    assert guard.json_content_type(ctype) is ok
