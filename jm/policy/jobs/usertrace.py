"""What a user sees of a failure: the traceback of their own code, and one line for it.

Pure (standard library only: job processes, the peer and the `jm` client use it).

* `user_traceback` keeps, in a traceback and each exception chained to it, the frames of
  the user's code: the frames of the runner (`hidden`: this project's package, runpy,
  importlib's bootstrap) are dropped, and of a run of library frames (`collapsed`:
  pyspark, py4j) only the first is kept, the call the user's code made into Spark (none
  when the runner made it, as for a SQL job): what Spark did inside is in the message.
* `frame_lines` takes the frames (no message) of the last exception of a formatted
  traceback, for a client that shows the message itself in one line.
* `error_line` is an exception's one line: its type and the first line of its message,
  Spark's error class in front when the message does not start with it, no "JVM
  stacktrace:" section, no "== SQL ==" excerpt.
"""
from __future__ import annotations

import copy
import traceback
from typing import Iterable, Optional, Sequence

INTERNAL = ("<frozen importlib._bootstrap", "<frozen runpy", "<frozen zipimport")
MAX_LINE = 1000  # characters of the one line


def _under(filename: str, prefixes: Iterable[str]) -> bool:
    return any(filename == p or filename.startswith(p) for p in prefixes if p)


def user_frames(frames: Sequence[traceback.FrameSummary], hidden: Sequence[str],
                collapsed: Sequence[str]) -> list[traceback.FrameSummary]:
    """The frames of `frames` a user reads: none under a `hidden` prefix (nor importlib's
    frozen frames); of consecutive frames under a `collapsed` prefix, the first only,
    and only when the user's code called it."""
    out: list[traceback.FrameSummary] = []
    in_library = False
    for f in frames:
        name = f.filename or ""
        if name.startswith(INTERNAL) or _under(name, hidden):
            continue
        if _under(name, collapsed):
            if in_library or not out:  # inside Spark, or called by the runner
                continue
            in_library = True
        else:
            in_library = False
        out.append(f)
    return out


def shown_name(filename: str, names: Sequence[tuple[str, str]]) -> str:
    """`filename` as the user named it: a file the peer holds under another path (an
    uploaded script in its blob store, a copy in a run folder) under the name it was
    given (`names`: (local path, shown name), a folder's files under the folder's)."""
    for local, shown in names:
        if filename == local:
            return shown
        if local and filename.startswith(local.rstrip("/") + "/"):
            return shown.rstrip("/") + "/" + filename[len(local.rstrip("/")) + 1:]
    return filename


def _renamed(frames: Sequence[traceback.FrameSummary],
             names: Sequence[tuple[str, str]]) -> list[traceback.FrameSummary]:
    out = []
    for f in frames:
        shown = shown_name(f.filename or "", names)
        if shown != f.filename:
            f = copy.copy(f)
            f.filename = shown
        out.append(f)
    return out


def user_traceback(te: traceback.TracebackException, hidden: Sequence[str],
                   collapsed: Sequence[str], _seen: Optional[set] = None,
                   names: Sequence[tuple[str, str]] = ()) -> traceback.TracebackException:
    """A copy of `te` whose stack, and that of each exception chained to it (cause,
    context, the members of a group), has only the user's frames (`user_frames`), their
    files named as the user gave them (`names`, `shown_name`), a SyntaxError's too."""
    seen = set() if _seen is None else _seen
    if id(te) in seen:
        return te
    seen.add(id(te))
    out = copy.copy(te)
    out.stack = traceback.StackSummary.from_list(
        _renamed(user_frames(te.stack, hidden, collapsed), names))
    if getattr(te, "filename", None):  # a SyntaxError's place
        out.filename = shown_name(te.filename, names)
    for attr in ("__cause__", "__context__"):
        chained = getattr(te, attr, None)
        if chained is not None:
            setattr(out, attr, user_traceback(chained, hidden, collapsed, seen, names))
    members = getattr(te, "exceptions", None)
    if members:
        out.exceptions = [user_traceback(m, hidden, collapsed, seen, names)
                          for m in members]
    return out


def frame_lines(text: str) -> list[str]:
    """The frame lines ("  File ...", and the source lines under them) of the last
    traceback in `text` (the exception that ended the job), without its message; a
    SyntaxError's place (its file, line and caret) when it has no frame."""
    lines = text.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call")]
    out: list[str] = []
    for ln in lines[starts[-1] + 1 if starts else 0:]:
        if not ln.startswith(" "):
            break
        out.append(ln)
    return out


def first_line(message: str) -> str:
    """The first line of `message` with text on it, before any "JVM stacktrace:"."""
    head = message.split("JVM stacktrace:", 1)[0]
    for ln in head.splitlines():
        if ln.strip():
            return ln.strip()
    return ""


def error_line(type_name: str, message: str, error_class: Optional[str] = None) -> str:
    """`Type: first line of the message`, with `[ERROR_CLASS]` in front of the message
    when Spark gave one the message does not start with; at most MAX_LINE characters."""
    line = first_line(message)
    if line.startswith(type_name + ":"):  # a worker's text has the type already
        line = line[len(type_name) + 1:].strip()
    if error_class and not line.startswith(f"[{error_class}]"):
        line = f"[{error_class}] {line}".strip()
    text = f"{type_name}: {line}" if line else type_name
    return text if len(text) <= MAX_LINE else text[:MAX_LINE - 3] + "..."
