"""Named credentials on a peer (`POST/GET /tokens`, `DELETE /tokens/{name}`, `jm token`):
the gateway's side. A token's secret is made here, shown once in the answer to its
creation and kept only as its SHA-256 in the replicated state (raft/tokens.py); every
request with a bearer that is not the root credential is checked against this peer's
replica (`credential`), so a revocation holds on a peer as soon as it applied it."""
from __future__ import annotations

import hashlib
import secrets
import time
from typing import Any, Optional

from jm.cluster.reads import GatewayBase, api_errors
from raft.commands import CreateToken, RevokeToken
from rest.gateway import ApiError, Credential

PREFIX = "jmt_"  # a token's secret starts with it (easy to find in a leaked file)


class TokenWrites(GatewayBase):
    def credential(self, digest: str) -> Optional[Credential]:
        with self.raft.read() as st:
            name = st.token_digests.get(digest)
            rec = st.tokens.get(name) if name is not None else None
            return Credential(rec.name, rec.role, rec.tenant) if rec is not None else None

    @api_errors
    async def create_token(self, name: Any, role: Any, tenant: Any) -> dict:
        for field, value in (("name", name), ("role", role)):
            if not isinstance(value, str) or not value:
                raise ApiError(400, f"{field} must be a non-empty string")
        if tenant is not None and not isinstance(tenant, str):
            raise ApiError(400, "tenant must be a string (or absent: every tenant)")
        secret = PREFIX + secrets.token_urlsafe(32)
        digest = hashlib.sha256(secret.encode()).hexdigest()
        self._writable()
        res = await self.raft.submit(CreateToken(name, role, tenant or None, digest,
                                                 time.time()),
                                     self.conf["rest.write-timeout"])
        if not res.ok:
            raise ApiError(409 if res.code == "exists" else 400, res.error)
        return {"name": name, "role": role, "tenant": tenant or None, "token": secret}

    def list_tokens(self) -> list:
        with self.raft.read() as st:
            return [{"name": t.name, "role": t.role, "tenant": t.tenant,
                     "created": t.created} for t in sorted(st.tokens.values(),
                                                           key=lambda t: t.name)]

    @api_errors
    async def revoke_token(self, name: str) -> None:
        await self._write(RevokeToken(name, time.time()))
