"""JSON Web Tokens as bearers (rest.auth.jwt.*): verified with the identity provider's
public key or key set (a file, re-read when it changes, or a JWKS URL, fetched off the
event loop and again when a token names a key it does not have: key rotation without a
restart), their role and tenant read from configured claims.

A token that does not verify (signature, `exp` with 60 s of leeway, `iss`, `aud`,
algorithm), lives longer than `rest.auth.jwt.max-lifetime`, or names no tenant while no
`rest.auth.jwt.default-tenant` is set, is no credential: `JwtRefused` with why, a 401
with RFC 6750's `error="invalid_token"`. A verified one whose role claim maps to no role
has the empty role (403 on every route). `check_claims` (pure) decides from the claims;
`JwtVerifier` finds the key and verifies the signature."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Union

from raft.tokens import ROLES as TOKEN_ROLES
from jm.api import Credential

log = logging.getLogger("jm.rest")

ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384",
              "PS512"]  # asymmetric only: the peers hold no signing secret
ROLES = TOKEN_ROLES  # weakest first
EVERY_TENANT = "*"  # rest.auth.jwt.default-tenant: a token without a tenant sees them all
REFETCH_EVERY = 30.0  # s: a JWKS URL is fetched again for an unknown key at most this often


class JwtRefused(Exception):
    """A bearer that looks like a JWT and is no credential; the text says why (the REST
    layer answers 401 with it: `bearer_refused`)."""
    bearer_refused = True


def looks_like_jwt(bearer: str) -> bool:
    return bearer.count(".") == 2 and not bearer.startswith("jmt_")


def claim(claims: dict, path: str) -> Any:
    """A claim by its name, or a dotted path into nested objects."""
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


@dataclass(frozen=True)
class JwtPolicy:
    """What a verified token must carry, and how its claims become a credential."""
    issuer: Optional[str] = None
    audience: Optional[str] = None
    role_claim: str = "role"
    tenant_claim: str = "tenant"
    default_tenant: Optional[str] = None   # None: a token without a tenant is refused
    max_lifetime: float = 24 * 3600.0      # s from `iat` (else from now) to `exp`
    leeway: float = 60.0                   # s of clock difference allowed
    role_map: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_conf(cls, conf: Any) -> "JwtPolicy":
        return cls(conf["rest.auth.jwt.issuer"], conf["rest.auth.jwt.audience"],
                   conf["rest.auth.jwt.role-claim"], conf["rest.auth.jwt.tenant-claim"],
                   conf["rest.auth.jwt.default-tenant"], conf["rest.auth.jwt.max-lifetime"],
                   60.0, conf["rest.auth.jwt.role-map"])


def role_of(value: Any, role_map: Mapping[str, str]) -> str:
    """The strongest role a role claim gives: a role's name, or a value (or, for a list
    of groups, any of them) that `role_map` maps to one; "" if none."""
    values = value if isinstance(value, list) else [value]
    found = [r for v in values if isinstance(v, str)
             for r in (role_map.get(v), v if v in ROLES else None) if r]
    return max(found, key=ROLES.index) if found else ""


def check_claims(claims: dict, policy: JwtPolicy, now: float) -> Union[Credential, str]:
    """The credential of a token's verified claims, or why they give none (pure)."""
    exp = claims.get("exp")
    iat = claims.get("iat")
    start = iat if isinstance(iat, (int, float)) and not isinstance(iat, bool) else now
    if isinstance(exp, (int, float)) and exp - start > policy.max_lifetime + policy.leeway:
        return (f"the token lives {exp - start:.0f} s, longer than "
                f"rest.auth.jwt.max-lifetime ({policy.max_lifetime:.0f} s)")
    tenant = claim(claims, policy.tenant_claim)
    if tenant in (None, "", []):
        if policy.default_tenant is None:
            return (f"the token names no tenant (claim {policy.tenant_claim!r}) and "
                    "rest.auth.jwt.default-tenant is not set")
        tenant = None if policy.default_tenant == EVERY_TENANT else policy.default_tenant
    elif not isinstance(tenant, str):
        return f"the token's tenant claim {policy.tenant_claim!r} is not a string"
    return Credential(str(claims.get("sub") or "jwt"),
                      role_of(claim(claims, policy.role_claim), policy.role_map), tenant)


class FileKeys:
    """The keys of a PEM public key or JWKS file, read again when the file changes."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._seen: Optional[tuple] = None
        self.keys: dict = {}   # kid -> key
        self.key: Any = None   # the key of a token without a kid (one key only)

    def current(self) -> "FileKeys":
        st = os.stat(self.path)
        if (st.st_mtime_ns, st.st_size, st.st_ino) != self._seen:
            with open(self.path, encoding="utf-8") as f:
                self.keys, self.key = _parse_keys(f.read())
            self._seen = (st.st_mtime_ns, st.st_size, st.st_ino)
        return self

    async def find(self, kid: Optional[str]) -> Any:
        return _pick(self.current().keys, self.key, kid)


def _pick(keys: dict, single: Any, kid: Optional[str]) -> Any:
    """The key a token's `kid` names (a key set's), or the one key of a PEM file or of a
    set of one for a token without a kid; None if there is none."""
    if kid is not None and keys:
        return keys.get(kid)
    return single


def _parse_keys(text: str) -> tuple[dict, Any]:
    import jwt
    if text.lstrip().startswith("{"):  # a JWKS
        jwks = jwt.PyJWKSet.from_dict(json.loads(text))
        keys = {k.key_id: k.key for k in jwks.keys}
        return keys, (jwks.keys[0].key if len(jwks.keys) == 1 else None)
    return {}, text


class UrlKeys:
    """The keys of an identity provider's JWKS URL: fetched (in a thread) at the first
    token, and again when a token names a key not among them, at most every
    REFETCH_EVERY seconds (concurrent requests share one fetch)."""

    def __init__(self, url: str, fetch: Optional[Callable[[str], dict]] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.url, self.clock = url, clock
        self.fetch = fetch or _fetch_jwks
        self.keys: dict = {}
        self.key: Any = None
        self._fetched = float("-inf")
        self._inflight: Optional[asyncio.Future] = None

    async def find(self, kid: Optional[str]) -> Any:
        known = _pick(self.keys, self.key, kid)
        if known is not None or self.clock() - self._fetched < REFETCH_EVERY:
            return known
        if self._inflight is None:
            self._inflight = asyncio.ensure_future(self._refresh())
        try:
            await asyncio.shield(self._inflight)
        finally:
            if self._inflight is not None and self._inflight.done():
                self._inflight = None
        return _pick(self.keys, self.key, kid)

    async def _refresh(self) -> None:
        self._fetched = self.clock()
        try:
            text = await asyncio.to_thread(self.fetch, self.url)
            self.keys, self.key = _parse_keys(text)
        except Exception as exc:  # (unreachable, not a JWKS: the old keys stay)
            log.error("rest.auth.jwt.jwks-url %s: %s", self.url, exc)


def _fetch_jwks(url: str) -> str:
    import urllib.request
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.read(1024 * 1024).decode("utf-8")


class JwtVerifier:
    def __init__(self, keys: Union[FileKeys, UrlKeys], policy: JwtPolicy) -> None:
        self.keys, self.policy = keys, policy

    async def credential(self, token: str, now: Optional[float] = None) -> Credential:
        """The token's credential; JwtRefused saying why it is none."""
        import jwt
        try:
            kid = jwt.get_unverified_header(token).get("kid")
            key = await self.keys.find(kid)
            if key is None:
                raise JwtRefused(f"no key {kid!r} of the identity provider" if kid
                                 else "the token names no key (kid) and there are several")
            claims = jwt.decode(token, key, algorithms=ALGORITHMS, issuer=self.policy.issuer,
                                audience=self.policy.audience, leeway=self.policy.leeway,
                                options={"require": ["exp"],
                                         "verify_aud": bool(self.policy.audience)})
        except jwt.PyJWTError as exc:
            raise JwtRefused(f"the token does not verify: {exc}") from None
        except (ValueError, TypeError, OSError) as exc:
            raise JwtRefused(f"the token cannot be verified: {exc}") from None
        out = check_claims(claims, self.policy, time.time() if now is None else now)
        if isinstance(out, str):
            raise JwtRefused(out)
        return out
