"""jm/cluster/api/jwtauth.py: a verified JWT's claims as a credential (pure: lifetime, tenant,
role map), the JWKS URL's refetch for an unknown key (at most every 30 s, one fetch for
concurrent requests), and the configuration's checks."""
import asyncio

import pytest

from jm.cluster.api import jwtauth as J
from jm.config import load_config
from jm.configvalues import ConfigError
from jm.api import Credential

NOW = 1_000_000.0
P = J.JwtPolicy(issuer="i", max_lifetime=3600.0,
                role_map={"platform": "admin", "etl": "submit", "bi": "read"})


def claims(**kw):
    return {"sub": "alice", "exp": NOW + 600, "iat": NOW, "role": "submit", "tenant": "a",
            **kw}


def test_claims_become_a_credential():
    assert J.check_claims(claims(), P, NOW) == Credential("alice", "submit", "a")
    assert J.check_claims(claims(sub=None), P, NOW).name == "jwt"


@pytest.mark.parametrize("extra,why", [
    ({"iat": NOW, "exp": NOW + 3600 + 61}, "longer than rest.auth.jwt.max-lifetime"),
    ({"iat": None, "exp": NOW + 7200}, "longer than rest.auth.jwt.max-lifetime"),
    ({"tenant": None}, "names no tenant"),
    ({"tenant": ""}, "names no tenant"),
    ({"tenant": ["a", "b"]}, "not a string"),
])
def test_claims_that_give_no_credential_say_why(extra, why):
    out = J.check_claims({k: v for k, v in claims(**extra).items() if v is not None}, P, NOW)
    assert isinstance(out, str) and why in out


def test_a_token_without_a_tenant_takes_the_default_tenant_or_every_one_when_set():
    bare = {k: v for k, v in claims().items() if k != "tenant"}
    assert J.check_claims(bare, J.JwtPolicy(default_tenant="ops"), NOW).tenant == "ops"
    every = J.check_claims(bare, J.JwtPolicy(default_tenant="*"), NOW)
    assert every.tenant is None and every.sees_all


@pytest.mark.parametrize("value,role", [
    ("admin", "admin"), ("platform", "admin"), ("bi", "read"), ("root", ""), (None, ""),
    (["bi", "etl"], "submit"), (["x", "platform", "bi"], "admin"), ([], ""), (3, ""),
    (["read", "etl"], "submit"),
])
def test_the_role_map_maps_values_and_groups_to_the_strongest_role(value, role):
    assert J.role_of(value, P.role_map) == role


def test_a_jwks_url_is_fetched_again_for_an_unknown_key_at_most_every_30_s():
    import json
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa
    keys = [rsa.generate_private_key(65537, 2048) for _ in range(2)]

    def jwks(n):
        return json.dumps({"keys": [dict(json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(
            k.public_key())), kid=f"k{i}") for i, k in enumerate(keys[:n])]})
    served, fetched, now = [jwks(1)], [], [0.0]

    def fetch(url):
        fetched.append(url)
        return served[0]
    src = J.UrlKeys("https://idp/jwks", fetch, clock=lambda: now[0])

    async def run():
        assert await src.find("k0") is not None and len(fetched) == 1
        assert await src.find("k0") is not None and len(fetched) == 1  # known: no fetch
        served[0] = jwks(2)  # the provider rotates
        now[0] = 5.0
        assert await src.find("k1") is None and len(fetched) == 1  # not yet 30 s
        now[0] = 31.0
        got = await asyncio.gather(*(src.find("k1") for _ in range(5)))
        assert all(k is not None for k in got) and len(fetched) == 2  # one fetch for all
        now[0] = 100.0
        assert await src.find("nope") is None and len(fetched) == 3
    asyncio.run(run())


def _conf(tmp_path, **kw):
    return load_config(str(tmp_path), overrides=kw, environ={})


def test_jwt_configuration_errors(tmp_path):
    key = tmp_path / "k.pem"
    key.write_text("x")
    with pytest.raises(ConfigError, match="issuer or rest.auth.jwt.audience must be set"):
        _conf(tmp_path, **{"rest.auth.jwt.key-file": str(key)})
    with pytest.raises(ConfigError, match="give one"):
        _conf(tmp_path, **{"rest.auth.jwt.key-file": str(key), "rest.auth.jwt.issuer": "i",
                           "rest.auth.jwt.jwks-url": "https://idp/jwks"})
    with pytest.raises(ConfigError, match="not an http"):
        _conf(tmp_path, **{"rest.auth.jwt.jwks-url": "ftp://idp", "rest.auth.jwt.issuer": "i"})
    with pytest.raises(ConfigError, match="role-map"):
        _conf(tmp_path, **{"rest.auth.jwt.role-map": "ops=root"})
    c = _conf(tmp_path, **{"rest.auth.jwt.jwks-url": "https://idp/jwks",
                           "rest.auth.jwt.audience": "jm",
                           "rest.auth.jwt.role-map": "platform=admin, etl=submit"})
    assert c["rest.auth.jwt.role-map"] == {"platform": "admin", "etl": "submit"}
    assert c["rest.auth.jwt.max-lifetime"] == 24 * 3600
