"""Named credentials with roles through real peers (in-process, real Raft and aiohttp):
created over REST and with `jm token`, checked by every peer on every route family
(read < submit < admin: 403 below the role, 401 without a credential), never listed
with their secrets, revoked on every peer."""
from tests.conftest import running
from tests.helpers import ahttp, apoll
from tests.integration.test_cli import jm

ROOT = "root-token"

# (method, path, body, role needed): one route of each family
ROUTES = [
    ("GET", "/jobs", None, "read"), ("GET", "/v1/jobs/nope/status", None, "read"),
    ("GET", "/jobs/nope/logs", None, "read"), ("GET", "/metrics", None, "read"),
    ("GET", "/artifacts", None, "read"), ("GET", "/batches", None, "read"),
    ("GET", "/sessions", None, "read"), ("GET", "/cluster/peers", None, "read"),
    ("GET", "/v1/sessions/nope/operations/x/status", None, "read"),
    ("POST", "/jobs", {}, "submit"), ("PATCH", "/v1/jobs/nope", None, "submit"),
    ("POST", "/v1/jobs", {}, "submit"),  # Flink's prefix of a route without its own
    ("PUT", "/tenants/a", {"slots": 1}, "admin"), ("GET", "/audit", None, "admin"),
    ("GET", "/tenants", None, "read"), ("GET", "/pipelines", None, "read"),
    ("PUT", "/pipelines/x", [], "submit"), ("DELETE", "/pipelines/x", None, "submit"),
    ("POST", "/jobs/nope/savepoints", {}, "submit"), ("POST", "/batches", {}, "submit"),
    ("POST", "/sessions", {"kind": "bogus"}, "submit"),
    ("POST", "/v1/sessions/nope/statements", {"statement": "SELECT 1"}, "submit"),
    ("DELETE", "/artifacts/sha256:00", None, "submit"),
    ("POST", "/cluster/rebalance", None, "admin"), ("POST", "/nodes/nope/drain", None,
                                                   "admin"),
    ("POST", "/cluster/peers", {}, "admin"), ("GET", "/tokens", None, "admin"),
    ("DELETE", "/tokens/nope", None, "admin")]
RANK = {"read": 1, "submit": 2, "admin": 3}


def bearer(token):
    return {"Authorization": f"Bearer {token}"}


async def test_roles_on_every_route_family_and_revocation_on_every_peer(tmp_path):
    async with running(str(tmp_path), 2, {"rest.auth.token": ROOT}) as c:
        root = bearer(ROOT)
        secrets = {}
        for name, role, tenant in (("reader", "read", None), ("team-a", "submit", "a")):
            s, b = await ahttp("POST", c.url(0) + "/tokens",
                               {"name": name, "role": role, "tenant": tenant}, headers=root)
            assert s == 201 and b["role"] == role and b["token"].startswith("jmt_"), b
            secrets[role] = b["token"]
        env = {"JM_TOKEN": ROOT}
        rc, out, err = await jm("-a", c.url(1), "token", "create", "ops", "--role", "admin",
                                env=env)
        assert rc == 0 and out.strip().startswith("jmt_"), (out, err)
        secrets["admin"] = out.strip()
        s, b = await ahttp("GET", c.url(1) + "/tokens", headers=root)
        assert s == 200 and [(t["name"], t["role"], t["tenant"]) for t in b["tokens"]] == [
            ("ops", "admin", None), ("reader", "read", None), ("team-a", "submit", "a")]
        assert not any(v in str(b) for v in secrets.values())  # never the secrets
        for method, path, body, need in ROUTES:
            for peer in (0, 1):
                for role, secret in secrets.items():
                    s, b = await ahttp(method, c.url(peer) + path, body,
                                       headers=bearer(secret))
                    if RANK[role] < RANK[need]:
                        assert s == 403 and b == {"errors": [f"the {role} role may not do "
                                                             "this"]}, (path, role, s, b)
                    else:
                        assert s not in (401, 403), (path, role, s, b)
                for headers in ({}, bearer("jmt_not-a-token")):
                    s, b = await ahttp(method, c.url(peer) + path, body, headers=headers)
                    assert s == 401 and b["errors"], (path, headers, s, b)
        # bad input: one readable error, nothing created
        for body, status in (({"name": "reader", "role": "read"}, 409),
                             ({"name": "x", "role": "root"}, 400),
                             ({"name": "has space", "role": "read"}, 400),
                             ({"role": "read"}, 400), ({"name": "x", "role": "read",
                                                        "roles": []}, 400)):
            s, b = await ahttp("POST", c.url(0) + "/tokens", body, headers=root)
            assert s == status and b["errors"], (body, s, b)
        rc, out, err = await jm("-a", c.url(0), "token", "revoke", "nobody", env=env)
        assert rc == 1 and err.startswith("jm: ") and len(err.splitlines()) == 1, err
        # revoked through one peer: refused by every peer
        rc, out, err = await jm("-a", c.url(1), "token", "revoke", "reader", env=env)
        assert rc == 0, err
        for peer in (0, 1):
            async def refused(p=peer):
                s, _ = await ahttp("GET", c.url(p) + "/jobs", headers=bearer(secrets["read"]))
                return s == 401
            await apoll(refused, 10, what=f"the revoked token refused by peer {peer}")
        rc, out, err = await jm("-a", c.url(0), "token", "list", env=env)
        assert rc == 0 and out.split() == ["ops", "admin", "*", "team-a", "submit", "a"], out


async def test_jwt_bearers_from_an_identity_provider(tmp_path):
    """JWTs signed by an identity provider's key (a JWKS file, keys by `kid`): role and
    tenant from configured claims; a bad signature, another issuer or audience, an expired
    or `exp`-less token, a symmetric algorithm are 401; no known role a 403."""
    import json
    import time
    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    idp, other = rsa.generate_private_key(65537, 2048), rsa.generate_private_key(65537, 2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    jwks = {"keys": [dict(json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(idp.public_key())),
                          kid="rsa-1", use="sig", alg="RS256"),
                     dict(json.loads(jwt.algorithms.ECAlgorithm.to_jwk(ec_key.public_key())),
                          kid="ec-1", use="sig", alg="ES256")]}
    key_file = tmp_path / "jwks.json"
    key_file.write_text(json.dumps(jwks))
    settings = {"rest.auth.token": ROOT, "rest.auth.jwt.key-file": str(key_file),
                "rest.auth.jwt.issuer": "https://idp.example", "rest.auth.jwt.audience": "jm",
                "rest.auth.jwt.role-claim": "jm.role", "rest.auth.jwt.max-lifetime": "1 h",
                "rest.auth.jwt.role-map": "data-eng=submit,platform=admin"}

    def token(claims=None, key=idp, kid="rsa-1", alg="RS256", **extra):
        body = {"sub": "alice", "iss": "https://idp.example", "aud": "jm",
                "exp": time.time() + 300, "jm": {"role": "submit"}, "tenant": "a",
                **(claims or {})}
        return jwt.encode({k: v for k, v in body.items() if v is not None}, key,
                          algorithm=alg, headers={"kid": kid}, **extra)
    async with running(str(tmp_path / "c"), 2, settings) as c:
        async def status(method, path, tok, body=None, peer=0):
            return (await ahttp(method, c.url(peer) + path, body, headers=bearer(tok)))[0]
        assert await status("GET", "/jobs", token()) == 200
        assert await status("POST", "/jobs", token(), {}, peer=1) == 400  # allowed: bad spec
        assert await status("POST", "/cluster/rebalance", token()) == 403
        reader = token({"jm": {"role": "read"}}, key=ec_key, kid="ec-1", alg="ES256")
        assert await status("GET", "/jobs", reader, peer=1) == 200
        assert await status("POST", "/jobs", reader, {}) == 403
        assert await status("POST", "/cluster/rebalance",
                            token({"jm": {"role": "admin"}})) not in (401, 403)
        assert await status("GET", "/jobs", token({"jm": {"role": "root"}})) == 403
        for bad in (token(key=other), token({"iss": "https://evil.example"}),
                    token({"aud": "another"}), token({"exp": time.time() - 120}),
                    token({"exp": None}), jwt.encode({"sub": "x", "exp": time.time() + 60,
                                                      "jm": {"role": "admin"}}, "s" * 32,
                                                     algorithm="HS256")):
            assert await status("GET", "/jobs", bad) == 401, jwt.decode(
                bad, options={"verify_signature": False})

        async def refused(tok, why):  # RFC 6750: invalid_token, and why
            s, b, h = await ahttp("GET", c.url(0) + "/jobs", headers=bearer(tok),
                                  with_headers=True)
            assert s == 401 and why in b["errors"][0], b
            assert 'error="invalid_token"' in h["WWW-Authenticate"] and why in h[
                "WWW-Authenticate"], h
        # fails closed: a token naming no tenant is no credential of every tenant
        await refused(token({"tenant": None}), "names no tenant")
        await refused(token({"tenant": ""}), "names no tenant")
        # a token living longer than rest.auth.jwt.max-lifetime (1 h)
        await refused(token({"iat": time.time(), "exp": time.time() + 7200}),
                      "longer than rest.auth.jwt.max-lifetime")
        assert await status("GET", "/jobs", token({"exp": time.time() - 30})) == 200  # leeway
        # the role map: an identity provider's groups, the strongest wins
        groups = token({"jm": {"role": ["analysts", "data-eng"]}})
        assert await status("POST", "/jobs", groups, {}) == 400  # submit: a bad spec
        s, b, h = await ahttp("POST", c.url(0) + "/cluster/rebalance", headers=bearer(groups),
                              with_headers=True)
        assert s == 403 and 'error="insufficient_scope"' in h["WWW-Authenticate"], (b, h)
        s, b, h = await ahttp("GET", c.url(0) + "/jobs", with_headers=True)
        assert s == 401 and h["WWW-Authenticate"] == 'Bearer realm="jobmanager"'  # none sent
        # the provider rotates its keys: the file is read again, no restart
        new = rsa.generate_private_key(65537, 2048)
        await refused(token(key=new, kid="rsa-2"), "no key 'rsa-2'")
        jwks["keys"].append(dict(json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(
            new.public_key())), kid="rsa-2", use="sig", alg="RS256"))
        key_file.write_text(json.dumps(jwks))
        assert await status("GET", "/jobs", token(key=new, kid="rsa-2"), peer=1) == 200


async def test_jwt_keys_from_the_identity_provider_s_jwks_url(tmp_path):
    """rest.auth.jwt.jwks-url: the key set fetched from the provider (a real HTTP server
    on 127.0.0.1), off the event loop; a token of a key it does not have is refused."""
    import json
    import time
    import jwt
    from aiohttp import web
    from cryptography.hazmat.primitives.asymmetric import rsa
    idp = rsa.generate_private_key(65537, 2048)
    jwks = {"keys": [dict(json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(idp.public_key())),
                          kid="k1", use="sig", alg="RS256")]}
    hits = []

    async def serve(request):
        hits.append(request.path)
        return web.json_response(jwks)
    app = web.Application()
    app.router.add_get("/.well-known/jwks.json", serve)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    settings = {"rest.auth.token": ROOT, "rest.auth.jwt.audience": "jm",
                "rest.auth.jwt.jwks-url": f"http://127.0.0.1:{port}/.well-known/jwks.json"}
    try:
        async with running(str(tmp_path / "c"), 1, settings) as c:
            def token(kid="k1", key=idp):
                return jwt.encode({"sub": "bob", "aud": "jm", "exp": time.time() + 300,
                                   "role": "read", "tenant": "a"}, key, algorithm="RS256",
                                  headers={"kid": kid})
            s, b = await ahttp("GET", c.url(0) + "/jobs", headers=bearer(token()))
            assert s == 200, b
            s, b = await ahttp("GET", c.url(0) + "/jobs", headers=bearer(token()))
            assert s == 200 and hits == ["/.well-known/jwks.json"]  # fetched once
            s, b = await ahttp("GET", c.url(0) + "/jobs", headers=bearer(token(
                "k9", rsa.generate_private_key(65537, 2048))))
            assert s == 401 and "no key 'k9'" in b["errors"][0], b
    finally:
        await runner.cleanup()
