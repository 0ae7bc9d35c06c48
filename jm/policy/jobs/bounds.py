"""Bounds on what a job hands back to the cluster (pure): failure texts and results that
the replicated state can hold, whatever the job wrote or however it ended.

* `readable(text)`: a str msgpack can encode (UTF-8). A lone surrogate, as in
  `sys.exit(f"cannot read {name}")` over a file name that is not UTF-8 ('\\udcff'), becomes
  its backslash escape, readable and never a refused report.
* `truncate(text, limit)`: at most `limit` UTF-8 bytes, ending (or, with `keep="tail"`,
  starting) with a marker saying how many bytes were cut.
* `bounded_failure(failure, limit)`: a failure mapping as a StatusReport carries it, each
  text truncated (the exception keeps its head, the traceback its tail).
* `storable(value)`: a JSON-like value with every string made readable and every key a str.
"""
from __future__ import annotations

import json
from typing import Any

MARKER = "... [truncated, {n} bytes]"       # after the head kept
TAIL_MARKER = "[truncated, {n} bytes] ..."  # before the tail kept


def readable(text: Any) -> str:
    """`text` as a str that encodes as UTF-8 (lone surrogates become '\\udcff' escapes)."""
    s = text if isinstance(text, str) else str(text)
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "backslashreplace").decode("utf-8")


def truncate(text: Any, limit: int, keep: str = "head") -> str:
    """`text` made readable and cut to at most `limit` UTF-8 bytes, marker included: the
    marker names how many bytes were cut. keep="tail" keeps the end (a traceback's last
    frames and the exception say the most)."""
    s = readable(text)
    data = s.encode("utf-8")
    if len(data) <= limit:
        return s
    head = keep != "tail"
    fmt = MARKER if head else TAIL_MARKER
    room = max(0, limit - len(fmt.format(n=len(data)).encode("utf-8")))
    kept = (data[:room] if head else data[len(data) - room:]).decode("utf-8", "ignore")
    marker = fmt.format(n=len(data) - len(kept.encode("utf-8")))
    return kept + marker if head else marker + kept


def bounded_failure(failure: Any, limit: int) -> dict:
    """A failure ({"exception", "traceback", "final", "reason", ...}) with readable texts of
    at most `limit` bytes each; anything that is not a mapping becomes its text."""
    if not isinstance(failure, dict):
        failure = {"exception": failure}
    out: dict = {}
    for key, value in failure.items():
        key = readable(key)
        if value is None or isinstance(value, (bool, int, float)):
            out[key] = value
        elif isinstance(value, str):
            out[key] = truncate(value, limit, "tail" if key == "traceback" else "head")
        else:
            out[key] = truncate(json.dumps(storable(value), default=str), limit)
    if not isinstance(out.get("exception"), str):
        out["exception"] = "" if out.get("exception") is None else str(out["exception"])
    if not isinstance(out.get("traceback"), str):
        out["traceback"] = ""
    return out


def storable(value: Any) -> Any:
    """A JSON-like value msgpack encodes: readable strings, str keys; other leaves as text."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, str):
        return readable(value)
    if isinstance(value, dict):
        return {readable(k): storable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [storable(v) for v in value]
    return readable(value)


def json_size(value: Any) -> int:
    """Bytes of `value` as compact JSON (how the spec limits measure a field)."""
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False,
                          default=str).encode("utf-8", "backslashreplace"))
