"""Named credentials on a peer (`POST/GET /tokens`, `DELETE /tokens/{name}`, `jm token`):
the gateway's side. A token's secret is made here, shown once in the answer to its
creation and kept only as its SHA-256 in the replicated state (raft/tokens.py); every
request with a bearer that is not the root credential is checked against this peer's
replica (`credential`), so a revocation holds on a peer as soon as it applied it."""
from __future__ import annotations

import hashlib
import secrets
import time
import logging
from typing import TYPE_CHECKING, Any, Optional

from jm.cluster.api.jwtauth import FileKeys, JwtPolicy, JwtVerifier, UrlKeys, looks_like_jwt
from jm.cluster.api.apiwrites import Writes, api_errors
from raft.commands import CreateToken, RevokeToken

if TYPE_CHECKING:
    from jm.config import Config
    from raft.node import RaftHost
from jm.api import ApiError, Credential

log = logging.getLogger("jm.rest")
PREFIX = "jmt_"  # a token's secret starts with it (easy to find in a leaked file)


class Tokens:
    def __init__(self, conf: "Config", raft: "RaftHost", writes: Writes) -> None:
        self.conf, self.raft, self.writes = conf, raft, writes
        self._jwt: Any = None  # (jm/cluster/api/jwtauth.py) made at the first JWT bearer

    async def credential(self, bearer: str) -> Optional[Credential]:
        """The credential a bearer that is not the root one is: a JWT (with
        rest.auth.jwt.key-file or jwks-url; JwtRefused saying why one is none) or a named
        credential's secret; None if neither."""
        if self._jwt_keys() and looks_like_jwt(bearer):
            return await self._jwt_verifier().credential(bearer)
        digest = hashlib.sha256(bearer.encode("utf-8", "surrogateescape")).hexdigest()
        with self.raft.read() as st:
            name = st.token_digests.get(digest)
            rec = st.tokens.get(name) if name is not None else None
            return Credential(rec.name, rec.role, rec.tenant) if rec is not None else None

    def _jwt_keys(self) -> Optional[str]:
        return self.conf["rest.auth.jwt.key-file"] or self.conf["rest.auth.jwt.jwks-url"]

    def _jwt_verifier(self) -> JwtVerifier:
        if self._jwt is None:
            c = self.conf
            keys = (FileKeys(c["rest.auth.jwt.key-file"]) if c["rest.auth.jwt.key-file"]
                    else UrlKeys(c["rest.auth.jwt.jwks-url"]))
            self._jwt = JwtVerifier(keys, JwtPolicy.from_conf(c))
        return self._jwt

    @api_errors
    async def create(self, name: Any, role: Any, tenant: Any) -> dict:
        for field, value in (("name", name), ("role", role)):
            if not isinstance(value, str) or not value:
                raise ApiError(400, f"{field} must be a non-empty string")
        if tenant is not None and not isinstance(tenant, str):
            raise ApiError(400, "tenant must be a string (or absent: every tenant)")
        secret = PREFIX + secrets.token_urlsafe(32)
        digest = hashlib.sha256(secret.encode()).hexdigest()
        self.writes.writable()
        res = await self.writes.submit(CreateToken(name, role, tenant or None, digest,
                                                   time.time()))
        if not res.ok:
            raise ApiError(409 if res.code == "exists" else 400, res.error)
        return {"name": name, "role": role, "tenant": tenant or None, "token": secret}

    def list(self) -> list:
        with self.raft.read() as st:
            return [{"name": t.name, "role": t.role, "tenant": t.tenant,
                     "created": t.created} for t in sorted(st.tokens.values(),
                                                           key=lambda t: t.name)]

    @api_errors
    async def revoke(self, name: str) -> None:
        await self.writes.write(RevokeToken(name, time.time()))
