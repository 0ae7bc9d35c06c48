"""Every route, fuzzed (schemathesis, from rest/openapi.py) against real peers: requests
generated from the description, valid and invalid (wrong types, missing fields, odd
strings, huge numbers). No answer may be a 5xx but a 503 `{"errors": [...]}` (no leader,
no Spark here: a clear "try again"), every error must be `{"errors": [...]}`, and the
peers must be alive and answering at the end."""
import json
import os

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from jm.testing import MiniCluster
from rest import openapi
from tests.helpers import http

TOKEN = "fuzz-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
SCHEMA = schemathesis.openapi.from_dict(openapi.document())
FIX = os.path.dirname(os.path.abspath(__file__)) + "/"


@pytest.fixture(scope="module")
def peers(tmp_path_factory):
    with MiniCluster(peers=2, base_dir=str(tmp_path_factory.mktemp("fuzz")),
                     conf={"rest.auth.token": TOKEN, "cluster.secret": "fuzz-secret",
                           "jobmanager.slots": 2, "jobstore.expiration-time": "1 s"}) as mc:
        mc.stalls_before = [_stalls(u) for u in mc.urls]
        yield mc


def _stalls(url: str) -> float:
    """How many times the peer's event loop ran a timer more than 2.5 s late."""
    import re
    status, text = http("GET", url + "/metrics", headers=AUTH)
    assert status == 200, text
    count = re.search(r"^jm_event_loop_lag_seconds_count\{[^}]*\} (\S+)$", text, re.M)
    fine = re.search(r'^jm_event_loop_lag_seconds_bucket\{le="2.5"[^}]*\} (\S+)$', text, re.M)
    assert count and fine, "the loop lag histogram is not exported"
    return float(count.group(1)) - float(fine.group(1))


def _clear_error(response) -> None:
    status = response.status_code
    if status >= 500 and status != 503:
        raise AssertionError(f"HTTP {status}: {response.text[:500]}")
    if status >= 400:
        try:
            body = json.loads(response.text)
        except ValueError:
            raise AssertionError(f"HTTP {status} without a JSON body: {response.text[:300]}")
        errors = body.get("errors") if isinstance(body, dict) else None
        assert isinstance(errors, list) and errors and all(
            isinstance(e, str) and e for e in errors), f"HTTP {status}: {body!r}"[:500]


@SCHEMA.parametrize()
@settings(max_examples=int(os.environ.get("JM_FUZZ_EXAMPLES", "12")), deadline=None,
          database=None,
          suppress_health_check=list(HealthCheck))
def test_no_route_answers_a_server_error_or_an_unclear_one(case, peers):
    url = peers.urls[hash(case.path) % 2]
    response = case.call(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"},
                         timeout=30)
    _clear_error(response)


def test_the_peers_lived_through_it(peers):
    for url in peers.urls:
        status, body = http("GET", url + "/healthz", headers=AUTH)
        assert status == 200 and body["ok"] is True, body
    # no request held a peer's event loop (its leases, its Raft answers) for seconds
    assert [_stalls(u) for u in peers.urls] == peers.stalls_before


def test_uploads_that_are_not_the_multipart_they_claim_are_400(peers):
    """Found by the fuzz: a 500 for each (aiohttp raises out of the multipart reader)."""
    for ctype, body in (("multipart/form-data", b"x"),
                        ("multipart/form-data; boundary=b",
                         b'--b\r\nContent-Disposition: form-data; name="\xc3\x8f\x13"\r\n\r\n'
                         b"x\r\n--b--\r\n")):
        status, answer = http("POST", peers.urls[0] + "/artifacts", raw=body,
                              headers={**AUTH, "Content-Type": ctype})
        assert status == 400 and "not valid multipart" in answer["errors"][0], answer


def test_a_peer_address_is_bounded_before_it_reaches_the_state(peers):
    for peer in ("h" * 100_000 + ":1:2", "not a host:1:2"):
        status, answer = http("POST", peers.urls[0] + "/cluster/peers", {"peer": peer},
                              headers=AUTH)
        assert status == 400 and len(answer["errors"][0]) < 400, answer
