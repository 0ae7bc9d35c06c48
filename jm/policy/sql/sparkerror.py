"""A Spark error as users read it (pure): one line with Spark's error class and message,
e.g. `[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'. SQLSTATE: 42601 (line 1,
pos 0)`, out of the whole text a Spark Connect client's exception gives (its message
over several lines, the statement with a caret under the error, the analysed plan, and
with `spark.sql.pyspark.jvmStacktrace.enabled` the server's "JVM stacktrace:").

The whole text stays where operators look (`detail`: the SQL gateway's error list after
the short line, the peer's log); `jm sql`, the DB-API module and the Flink SQL Client's
first line show the short one. Standard library only: the client uses it too.
"""
from __future__ import annotations

import re

MAX_SHORT = 1000  # characters of the one line, at most

# Spark's error class, at the start of a line or after the exception's type ("Type: ")
_CLASS = re.compile(r"(?:^|: )(\[[A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*\] )", re.M)
_PY_TRACE = "Traceback (most recent call last):"
_SQLSTATE = re.compile(r"SQLSTATE: [0-9A-Z]{5}")
_STACK_MARKERS = ("JVM stacktrace:", "== SQL", "== Physical Plan", "== Analyzed Logical Plan")
_TRAILER = re.compile(r"^[;:,.\s]+|[;:,\s]+$")


def _before_stack(text: str) -> str:
    """The text before a stack trace, an echo of the statement or a plan."""
    cut = len(text)
    for marker in _STACK_MARKERS:
        at = text.find(marker)
        if at >= 0:
            cut = min(cut, at)
    return text[:cut]


def short(text: str) -> str:
    """The one line a user is shown of a Spark error `text` (idempotent)."""
    text = str(text or "")
    head = _before_stack(text)
    found = _CLASS.search(head)
    if found is None:
        return _one_line(_unclassified(head.strip() or text.strip()))
    body = head[found.start(1):]
    state = _SQLSTATE.search(body)
    if state is not None:  # Spark ends its message with it; the rest of its line is the
        end = body.find("\n", state.end())  # position ("; line 1 pos 14", "(line 1, ...)")
        rest = body[state.end():] if end < 0 else body[state.end():end]
        tail = _TRAILER.sub("", rest)
        body = body[:state.end()] + (("; " if rest.lstrip().startswith(";") else " ") + tail
                                     if tail else "")
    else:
        body = body.split("\n\n", 1)[0]
    return _one_line(body)


def _unclassified(text: str) -> str:
    """An error without Spark's error class: its first line (and a Python worker's
    exception, the last line of the traceback it carries)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    first = lines[0].strip() if lines else ""
    at = text.find(_PY_TRACE)
    if at < 0:
        return first
    ends = [ln for ln in text[at:].splitlines()[1:] if ln.strip() and ln[0] not in " \t"]
    return f"{first} {ends[-1]}" if ends and ends[-1] != first else first


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_SHORT else line[:MAX_SHORT - 3] + "..."


def errors(text: str) -> list[str]:
    """An error answer's list (Flink's `{"errors": [...]}`): the short line first, then the
    whole text when it says more (as Flink's gateway puts its server-side stack second)."""
    text = str(text or "").strip()
    line = short(text)
    return [line] if not text or text == line else [line, text]
