"""Every route has the role it needs (rest/roles.py), and named credentials in the
replicated state (raft/tokens.py)."""
import pytest

from raft import commands as c
from raft.state import ClusterState
from rest import roles
from tests.unit.test_openapi import _routes


def test_every_route_the_app_serves_has_a_role_and_every_role_a_route():
    served = {(m, roles.template(p)) for m, p in _routes()}
    assert served - set(roles.ROUTES) == set(), "give these routes a role in rest/roles.py"
    assert set(roles.ROUTES) - served == set(), "rest/roles.py names routes nobody serves"


@pytest.mark.parametrize("method,path,need", [
    ("GET", "/jobs/{job_id}", roles.READ), ("HEAD", "/jobs", roles.READ),
    ("GET", "/v1/jobs/{job_id}/status", roles.READ), ("POST", "/jobs", roles.SUBMIT),
    ("PATCH", "/v1/jobs/{job_id}", roles.SUBMIT),
    ("POST", "/v2/sessions/{sh}/statements", roles.SUBMIT),
    ("GET", "/v1/sessions/{sh}/operations/{oh}/result/{token}", roles.READ),
    ("POST", "/cluster/rebalance", roles.ADMIN), ("GET", "/tokens", roles.ADMIN),
    ("POST", "/brand-new-route", roles.ADMIN),  # not in the table: admin
    ("GET", None, roles.READ),  # no route: a 404 for any credential
    ("GET", "/static/app.js", roles.OPEN)])
def test_required(method, path, need):
    assert roles.required(method, path) == need


def test_roles_are_ordered():
    assert roles.allows("admin", roles.SUBMIT) and roles.allows("submit", roles.READ)
    assert not roles.allows("read", roles.SUBMIT) and not roles.allows("submit", roles.ADMIN)
    assert not roles.allows("admin", roles.PEERS) and not roles.allows("bogus", roles.READ)
    assert roles.allows("read", roles.OPEN)


def test_tokens_in_the_state():
    st = ClusterState()
    ok = st.apply(c.CreateToken("ci", "submit", "team-a", "a" * 64, 1.0))
    assert ok.ok and st.token_digests["a" * 64] == "ci"
    for bad, code in ((c.CreateToken("ci", "read", None, "b" * 64, 2.0), "exists"),
                      (c.CreateToken("x2", "read", None, "a" * 64, 2.0), "exists"),
                      (c.CreateToken("x3", "root", None, "c" * 64, 2.0), "invalid"),
                      (c.CreateToken("bad name", "read", None, "c" * 64, 2.0), "invalid"),
                      (c.CreateToken("x4", "read", "", "c" * 64, 2.0), "invalid"),
                      (c.CreateToken("x5", "read", None, "secret", 2.0), "invalid")):
        res = st.apply(bad)
        assert not res.ok and res.code == code, (bad, res)
    assert st.apply(c.RevokeToken("ci", 3.0)).ok
    assert st.tokens == {} and st.token_digests == {}
    assert st.apply(c.RevokeToken("ci", 4.0)).code == "not-found"


def test_a_jwt_key_file_that_is_no_key_refuses_jwts_without_failing(tmp_path):
    import asyncio
    from jm.cluster.api.jwtauth import JwtRefused
    from jm.cluster.api.tokens import Tokens
    bad = tmp_path / "jwks.json"
    bad.write_text('{"keys": [{"kty": "nonsense"}]}')
    conf = {"rest.auth.jwt.key-file": str(bad), "rest.auth.jwt.jwks-url": None,
            "rest.auth.jwt.issuer": "i", "rest.auth.jwt.audience": None,
            "rest.auth.jwt.role-claim": "role", "rest.auth.jwt.tenant-claim": "tenant",
            "rest.auth.jwt.default-tenant": None, "rest.auth.jwt.max-lifetime": 3600.0,
            "rest.auth.jwt.role-map": {}}
    tokens = Tokens(conf, raft=None, writes=None)  # (credential() of a JWT reads neither)
    token = "eyJhbGciOiJSUzI1NiJ9.e30.c2ln"  # {"alg": "RS256"}, {}, "sig"
    for _ in range(2):
        with pytest.raises(JwtRefused, match="cannot be verified|does not verify"):
            asyncio.run(tokens.credential(token))