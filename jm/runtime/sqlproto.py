"""Messages between a peer and its SQL worker process, framed by jm/runtime/frames.py's
codec. The worker answers every request with one Reply carrying the same id."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from jm.runtime.frames import Codec

MAX_FRAME = 256 * 1024 * 1024  # the largest reply the peer reads from the worker


@dataclass(frozen=True)
class OpenSession:
    """Attach to (or create) the Spark Connect session `session` and rebuild its state:
    `properties` set, its `artifacts` added and its `python` given to its UDFs, then the
    state-defining statements in `replay` run in order."""
    session: str
    properties: dict = field(default_factory=dict)
    replay: tuple = ()
    # what the session brings (jm/cluster/sql/sessiondeps.py): files added to its Spark
    # session as artifacts, [kind, local path] each; its UDFs' interpreter (None: ours)
    artifacts: tuple = ()
    python: Optional[str] = None


@dataclass(frozen=True)
class Execute:
    """Run a statement; the reply comes with its first page (or its error)."""
    session: str
    op: str
    statement: str
    config: dict = field(default_factory=dict)
    page_rows: int = 1000


@dataclass(frozen=True)
class Fetch:
    """The next page of an operation's rows."""
    op: str
    page_rows: int = 1000


@dataclass(frozen=True)
class Cancel:
    op: str


@dataclass(frozen=True)
class CloseOperation:
    op: str


@dataclass(frozen=True)
class CloseSession:
    session: str
    release: bool = True  # end it in the Spark server too (not when it moved away)


@dataclass(frozen=True)
class Reply:
    ok: bool
    value: Any = None
    error: Optional[str] = None


CODEC = Codec(OpenSession, Execute, Fetch, Cancel, CloseOperation, CloseSession, Reply,
              max_frame=MAX_FRAME)
