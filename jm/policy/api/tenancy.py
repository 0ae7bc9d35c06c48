"""Whose new work is it (pure): the tenant a credential's new job, session or artifact
belongs to."""
from __future__ import annotations

from typing import Any, Optional

from jm.api import ApiError, Credential
from raft import tenants as T


def tenant_for(who: Credential, asked: Any) -> Optional[str]:
    """The tenant of new work `who` makes, asking for `asked` (None: its own): a
    credential of one tenant makes its tenant's work only (403 for another); the default
    tenant is None."""
    if asked is not None and not T.valid_name(asked):
        raise ApiError(400, "tenant: 1-64 letters, digits, '.', '_' or '-', starting with "
                            "a letter or digit")
    if who.tenant is not None and who.role != "admin":
        if asked is not None and asked != who.tenant:
            raise ApiError(403, f"a credential of tenant {who.tenant} makes work of its "
                                "own tenant only")
        return who.tenant
    chosen = asked if asked is not None else who.tenant
    return None if chosen == T.DEFAULT else chosen
