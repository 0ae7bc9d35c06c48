"""Messages between a peer and the process of one Livy `pyspark` interactive session
(jm/runtime/livyrepl.py), framed by jm/runtime/frames.py's codec. The process answers
every request with one Reply carrying the same id."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, Optional, Union

from jm.runtime import sqlproto
from jm.runtime.frames import Codec

# the largest frame the peer reads from the process: a result is cut to MAX_RESULT before
# it is sent (`bounded`, in the process: never on the peer's event loop)
MAX_FRAME = 8 * 1024 * 1024
MAX_RESULT = 1024 * 1024  # bytes of a result's text, %json and %table sent (JSON)
Reply = sqlproto.Reply   # ok, value (or error): the answer to every request


@dataclass(frozen=True)
class RunCode:
    """Run the Python code of statement `statement` in the session's namespace; the
    reply's value is the fields of a CodeResult (dataclasses.asdict)."""
    statement: int
    code: str


@dataclass(frozen=True)
class Interrupt:
    """Cancel statement `statement` if it runs (or waits to run); the reply's value says
    whether it did."""
    statement: int


@dataclass(frozen=True)
class CodeResult:
    status: str                       # "ok" | "error"
    text: str = ""                    # what the statement printed, and its value's repr
    json: Optional[Union[dict, list, Any]] = None   # %json's value
    table: Optional[dict] = None      # %table: {"headers": [...], "data": [[...]]}
    ename: str = ""
    evalue: str = ""
    traceback: tuple = ()             # lines of the user's code's traceback
    state: tuple = ()                 # the session's state-defining statements it ran

    @classmethod
    def from_value(cls, value: dict) -> "CodeResult":
        known = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in (value or {}).items() if k in known}
        for k in ("traceback", "state"):
            kwargs[k] = tuple(kwargs.get(k) or ())
        return cls(**kwargs)


def bounded(result: CodeResult, limit: int = MAX_RESULT) -> CodeResult:
    """The result as the process sends it: its %table's rows halved and its %json value
    dropped (saying so in its text) until its JSON is within `limit` bytes; its text is
    bounded where it is captured (jm.runtime.livyexec.BoundedText)."""
    def size(r: CodeResult) -> int:
        return len(json.dumps(dataclasses.asdict(r), default=str))
    if size(result) <= limit:
        return result
    notes = []
    table = result.table
    if isinstance(table, dict) and isinstance(table.get("data"), list):
        rows = list(table["data"])
        while rows and size(dataclasses.replace(result, table=dict(table, data=rows))) > limit:
            rows = rows[:len(rows) // 2]
        if len(rows) < len(table["data"]):
            notes.append(f"[%table cut: {len(rows)} of {len(table['data'])} rows kept]")
        result = dataclasses.replace(result, table=dict(table, data=rows))
    if size(result) > limit and result.json is not None:
        notes.append(f"[%json value not kept: more than {limit} bytes]")
        result = dataclasses.replace(result, json=None)
    if size(result) > limit:  # (a traceback of a deep recursion, a huge exception text)
        result = dataclasses.replace(result, evalue=result.evalue[:4096],
                                     traceback=result.traceback[-20:],
                                     text=result.text[:limit // 2])
    if notes:
        result = dataclasses.replace(result, text="\n".join([result.text, *notes]).strip())
    return result


CODEC = Codec(RunCode, Interrupt, Reply, max_frame=MAX_FRAME)
