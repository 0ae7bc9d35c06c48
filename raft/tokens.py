"""Named credentials in the replicated state (pure, like raft/state.py): `CreateToken`
keeps a name, a role (read, submit, admin), a tenant and the SHA-256 of the secret;
`RevokeToken` forgets it. Every peer checks a bearer against its replica, so a revoked
credential is refused by a peer as soon as it applied the revocation."""
from __future__ import annotations

import re

from raft import commands as c
from raft.records import Result, TokenRecord

ROLES = ("read", "submit", "admin")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
DIGEST = re.compile(r"[0-9a-f]{64}")
MAX_TOKENS = 10_000


def create(state, cmd: c.CreateToken) -> Result:
    if not isinstance(cmd.name, str) or not NAME.fullmatch(cmd.name):
        return Result.fail("invalid", "a token's name is 1-64 letters, digits, '.', '_' or "
                                      "'-', starting with a letter or digit")
    if cmd.role not in ROLES:
        return Result.fail("invalid", f"a token's role is one of {', '.join(ROLES)}")
    if cmd.tenant is not None and (not isinstance(cmd.tenant, str)
                                   or not NAME.fullmatch(cmd.tenant)):
        return Result.fail("invalid", "a tenant's name is 1-64 letters, digits, '.', '_' "
                                      "or '-', starting with a letter or digit")
    if not isinstance(cmd.digest, str) or not DIGEST.fullmatch(cmd.digest):
        return Result.fail("invalid", "a token's digest is 64 hex digits")
    if cmd.name in state.tokens:
        return Result.fail("exists", f"a token named {cmd.name} exists; revoke it first")
    if cmd.digest in state.token_digests:
        return Result.fail("exists", "that secret is taken")
    if len(state.tokens) >= MAX_TOKENS:
        return Result.fail("full", f"there are {MAX_TOKENS} tokens; revoke some first")
    state.tokens[cmd.name] = TokenRecord(cmd.name, cmd.role, cmd.tenant, cmd.digest, cmd.time)
    state.token_digests[cmd.digest] = cmd.name
    return Result(True, cmd.name)


def revoke(state, cmd: c.RevokeToken) -> Result:
    rec = state.tokens.pop(cmd.name, None)
    if rec is None:
        return Result.fail("not-found", f"no token named {cmd.name}")
    state.token_digests.pop(rec.digest, None)
    return Result(True, cmd.name)


HANDLERS = {c.CreateToken: create, c.RevokeToken: revoke}
