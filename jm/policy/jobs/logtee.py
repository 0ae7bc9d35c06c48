"""Job output on the peer's stdout (`jobmanager.job-log.stdout`), pure: the bytes a job
process appended to its run log cut into whole lines (a partial line waits for its end;
a line longer than MAX_LINE is cut), and each line framed with the job and its attempt,
as text or as a JSON object (`jobmanager.log.format`)."""
from __future__ import annotations

import json
from typing import Optional

MAX_LINE = 16 * 1024  # bytes of one line of job output written to the peer's stdout


def split_lines(rest: bytes, data: bytes, max_line: int = MAX_LINE) -> tuple[list[bytes], bytes]:
    """(the whole lines in rest + data, what is left of a line not ended yet). A partial
    line longer than `max_line` goes out cut (its rest follows as further lines)."""
    *lines, rest = (rest + data).split(b"\n")
    out = [line[:max_line].rstrip(b"\r") for line in lines]
    while len(rest) > max_line:
        out.append(rest[:max_line])
        rest = rest[max_line:]
    return out, rest


def frame(line: bytes, job: str, attempt: str, kind: str, node: str,
          time: Optional[str] = None) -> str:
    """One line of job output as the peer writes it (no newline): text
    `[job=<id> attempt=<epoch>-<restart>] <line>`, or a JSON object with time (RFC 3339,
    UTC), node, job, attempt and message (`kind` "json")."""
    text = line.decode("utf-8", "backslashreplace")
    if kind == "json":
        return json.dumps({"time": time, "level": "INFO", "logger": "jm.job-output",
                           "node": node, "job": job, "attempt": attempt, "message": text})
    return f"[job={job} attempt={attempt}] {text}"
