"""The operation handle of a statement's request id in a session (pure, standard library:
the client computes it too, to cancel a statement whose answer has not come yet): the
same request sent again, to any peer, is the same operation."""
from __future__ import annotations

import uuid


def op_of(handle: str, request_id: str) -> str:
    """The operation of a request id in a session: a retried request gets the same."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"{handle}/{request_id}"))
