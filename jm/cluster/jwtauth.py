"""JSON Web Tokens as bearers (rest.auth.jwt.*): verified with the identity provider's
public key or key set, their role and tenant read from configured claims. A token that
does not verify (signature, `exp`, `iss`, `aud`, algorithm) is no credential (401); a
verified one whose role claim is not a role has the empty role (403 on every route)."""
from __future__ import annotations

import json
import logging
from typing import Any, Optional

from rest.gateway import Credential

log = logging.getLogger("jm.rest")

ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384",
              "PS512"]  # asymmetric only: the peers hold no signing secret
ROLES = ("read", "submit", "admin")


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


class JwtVerifier:
    def __init__(self, key_file: str, issuer: Optional[str], audience: Optional[str],
                 role_claim: str, tenant_claim: str) -> None:
        import jwt
        self.issuer, self.audience = issuer, audience
        self.role_claim, self.tenant_claim = role_claim, tenant_claim
        with open(key_file, encoding="utf-8") as f:
            text = f.read()
        self.key: Any = None
        self.keys: dict = {}
        if text.lstrip().startswith("{"):  # a JWKS
            jwks = jwt.PyJWKSet.from_dict(json.loads(text))
            self.keys = {k.key_id: k.key for k in jwks.keys}
            if len(jwks.keys) == 1:
                self.key = jwks.keys[0].key
        else:
            self.key = text

    def _key(self, token: str) -> Any:
        import jwt
        kid = jwt.get_unverified_header(token).get("kid")
        return self.keys.get(kid, self.key) if kid is not None else self.key

    def credential(self, token: str) -> Optional[Credential]:
        import jwt
        try:
            key = self._key(token)
            if key is None:
                return None
            claims = jwt.decode(token, key, algorithms=ALGORITHMS, issuer=self.issuer,
                                audience=self.audience,
                                options={"require": ["exp"], "verify_aud": bool(self.audience)})
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            log.debug("JWT bearer refused: %s", exc)
            return None
        role, tenant = claim(claims, self.role_claim), claim(claims, self.tenant_claim)
        return Credential(str(claims.get("sub") or "jwt"), role if role in ROLES else "",
                          str(tenant) if tenant not in (None, "") else None)
