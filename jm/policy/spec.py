"""Validation of job specs as submitted through REST or the CLI (pure)."""
from __future__ import annotations

import re
import uuid
from typing import Any

from jm.policy.restart import validate_override

FIELDS = {"name", "entry", "pyfiles", "args", "sql", "jobid", "slots", "restart-strategy",
          "savepoint-path", "job-type"}
JOB_TYPES = ("batch", "streaming")
ENTRY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*$")
JOBID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
ARTIFACT_RE = re.compile(r"^artifact:sha256:[0-9a-f]{64}$")
MAX_NAME = 200
RESERVED_IDS = {"overview"}  # would collide with GET /jobs/overview


class SpecError(ValueError):
    """A list of problems with a submitted spec."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


def new_job_id() -> str:
    return uuid.uuid4().hex


def validate_spec(spec: Any, max_slots: int | None = None) -> dict:
    """Return a normalised spec (with a jobid) or raise SpecError listing every problem."""
    if not isinstance(spec, dict):
        raise SpecError(["the job spec must be a JSON object"])
    errors = []
    unknown = sorted(set(spec) - FIELDS)
    if unknown:
        errors.append(f"unknown field(s): {', '.join(unknown)}")
    entry, sql = spec.get("entry"), spec.get("sql")
    if (entry is None) == (sql is None):
        errors.append("give exactly one of 'entry' (module:function) and 'sql'")
    if entry is not None and (not isinstance(entry, str) or not ENTRY_RE.fullmatch(entry)):
        errors.append("entry must look like 'package.module:function'")
    if sql is not None and (not isinstance(sql, str) or not sql.strip()):
        errors.append("sql must be a non-empty string")
    name = spec.get("name")
    if name is not None and (not isinstance(name, str) or not name.strip()
                             or len(name) > MAX_NAME):
        errors.append(f"name must be a non-empty string of at most {MAX_NAME} characters")
    jobid = spec.get("jobid")
    if jobid is not None and (not isinstance(jobid, str) or not JOBID_RE.fullmatch(jobid)):
        errors.append("jobid must be 1-64 letters, digits, '-' or '_', starting with a "
                      "letter or digit")
    elif jobid in RESERVED_IDS:
        errors.append(f"jobid {jobid!r} is reserved")
    slots = spec.get("slots", 1)
    if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
        errors.append("slots must be an integer >= 1")
    elif max_slots is not None and slots > max_slots:
        errors.append(f"slots must be at most {max_slots} (the largest peer's slots)")
    pyfiles = spec.get("pyfiles", [])
    if not isinstance(pyfiles, list) or not all(isinstance(p, str) for p in pyfiles):
        errors.append("pyfiles must be a list of strings")
    else:
        for p in pyfiles:
            if p.startswith("artifact:"):
                if not ARTIFACT_RE.fullmatch(p):
                    errors.append(f"pyfiles: {p!r} is not artifact:sha256:<64 hex digits>")
            elif not p.startswith("/"):
                errors.append(f"pyfiles: {p!r} must be an absolute path every peer can read "
                              "or an artifact:sha256:... id")
            elif not (p.endswith(".py") or p.endswith(".zip") or p.endswith(".egg")
                      or p.endswith("/")):
                errors.append(f"pyfiles: {p!r} must be a .py, .zip or .egg file or a directory/")
    args = spec.get("args", {})
    if not isinstance(args, dict):
        errors.append("args must be a JSON object")
    job_type = spec.get("job-type", "batch")
    if job_type not in JOB_TYPES:
        errors.append("job-type must be 'batch' (the default) or 'streaming' (moved by "
                      "rebalancing and drain, savepoints)")
    elif sql is not None and job_type == "streaming":
        errors.append("a SQL job is a batch job; job-type 'streaming' needs an entry")
    sp = spec.get("savepoint-path")
    if sp is not None and (not isinstance(sp, str) or not sp.startswith("/")):
        errors.append("savepoint-path must be an absolute path (a savepoint's location)")
    elif sp is not None and job_type != "streaming":
        errors.append("savepoint-path needs \"job-type\": \"streaming\"")
    rs = spec.get("restart-strategy")
    if rs is not None:
        try:
            rs = validate_override(rs)
        except ValueError as exc:
            errors.append(str(exc))
    if errors:
        raise SpecError(errors)
    out = {k: v for k, v in spec.items() if v is not None}
    out["jobid"] = jobid or new_job_id()
    out["slots"] = slots
    out["job-type"] = job_type
    out.setdefault("args", {})
    out.setdefault("pyfiles", [])
    if rs is not None:
        out["restart-strategy"] = rs
    if not out.get("name"):
        out["name"] = entry or "sql"
    return out
