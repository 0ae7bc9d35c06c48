"""The errors of RaftHost's write API (raft/node.py), and the settling of the futures
that pysyncobj's callbacks answer (on the asyncio loop, via call_soon_threadsafe)."""
from __future__ import annotations

import asyncio
from typing import Any

from pysyncobj import FAIL_REASON


class RaftUnavailable(Exception):
    """No leader, or the outcome of a write is unknown; the client may retry."""


class ProtocolRefused(Exception):
    """The command needs a newer protocol than the cluster runs (raft/protocol.py): it
    was not sent. `http_status`: what the REST layer answers (409, a conflict with the
    cluster's state that an upgrade ends)."""
    http_status = 409


class NotAppended(Exception):
    """pysyncobj refused the write before appending it: nothing was applied."""


class MembershipRefused(Exception):
    """The leader refused a membership change (one is in progress, or it changes nothing)."""


FAIL_NAMES = {getattr(FAIL_REASON, n): n for n in dir(FAIL_REASON) if n.isupper()}
_NOT_APPENDED = {getattr(FAIL_REASON, n) for n in ("MISSING_LEADER", "NOT_LEADER", "QUEUE_FULL")
                 if hasattr(FAIL_REASON, n)}


def settle(fut: asyncio.Future, error: int) -> None:
    if not fut.done():
        fut.set_result(error)


def resolve_future(fut: asyncio.Future, result: Any, error: int) -> None:
    if fut.done():
        return
    if error == FAIL_REASON.SUCCESS:
        fut.set_result(result)
    elif error in _NOT_APPENDED:
        fut.set_exception(NotAppended(FAIL_NAMES.get(error, error)))
    else:
        fut.set_exception(RaftUnavailable(f"Raft write failed: {FAIL_NAMES.get(error, error)}"))
