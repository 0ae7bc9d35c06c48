"""jm submit: the job spec from the command line, and the upload of a job's file.
Standard library only, like the rest of the CLI."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import uuid
from typing import Optional

from jm.client.cli_http import (ApiError, CliError, Client, UsageError, one_line, out,
                                print_json, savepoint_location)

CODE_SUFFIXES = (".py", ".zip", ".egg")
IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
from jm.policy.jobs.reqfile import MAX_REQUIREMENTS_FILE, RequirementsError, requirements_file
from jm.policy.jobs.vocab import ENTRY_RE  # (package.module:function)


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}")


def _multipart(filename: str, content: bytes) -> tuple[bytes, str]:
    boundary = "----jm" + uuid.uuid4().hex
    safe = filename.replace("\\", "_").replace('"', "_").replace("\r", "_").replace("\n", "_")
    head = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"{safe}\"\r\nContent-Type: application/octet-stream\r\n\r\n")
    body = head.encode("utf-8") + content + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def upload(client: Client, path: str, code: bool = True) -> dict:
    """POST /artifacts of a local file: code (.py, .zip, .egg), or with `code` false any
    file (spark-submit's --jars, --files, --archives)."""
    if code and not path.endswith(CODE_SUFFIXES):
        raise UsageError(f"{path}: only .py, .zip and .egg files can be uploaded")
    data = _read_file(path)
    body, ctype = _multipart(os.path.basename(path), data)
    res = client.request("POST", "/artifacts", raw=body, content_type=ctype)
    if not isinstance(res, dict) or not res.get("pyfile"):
        raise CliError(f"unexpected answer to the upload: {one_line(res, 200)}")
    return res


def canonical_name(client: Client, art: dict) -> str:
    """The name the cluster keeps for this artifact. The cluster stores one name per
    content hash (the first upload's), which is the file a job gets on every peer; so a
    re-upload of the same bytes under another file name must use the first name."""
    try:
        listing = client.get("/artifacts")
    except ApiError:
        return art.get("name") or ""
    for a in (listing or {}).get("artifacts", []):
        if a.get("id") == art.get("id") and a.get("name"):
            return a["name"]
    return art.get("name") or ""


def parse_args_kv(pairs: list[str], args_json: Optional[str]) -> Optional[dict]:
    if args_json is None and not pairs:
        return None
    args: dict = {}
    if args_json is not None:
        try:
            args = json.loads(args_json)
        except ValueError as exc:
            raise UsageError(f"--args-json is not valid JSON: {exc}")
        if not isinstance(args, dict):
            raise UsageError("--args-json must be a JSON object like '{\"key\": \"value\"}'")
    args.update(parse_pairs(pairs, "--arg"))
    return args


def parse_pairs(pairs: list[str], option: str) -> dict:
    """KEY=VALUE options (the value may contain '=') as a dict."""
    out: dict = {}
    for kv in pairs:
        key, sep, value = kv.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{option} {kv!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def parse_restart(text: str) -> dict:
    s = text.strip()
    if s.startswith("{"):
        try:
            obj = json.loads(s)
        except ValueError as exc:
            raise UsageError(f"--restart-strategy is not valid JSON: {exc}")
        if not isinstance(obj, dict):
            raise UsageError("--restart-strategy JSON must be an object")
        return obj
    if not s:
        raise UsageError("--restart-strategy is empty; use none, fixed-delay, "
                         "exponential-delay, failure-rate or a JSON object")
    return {"type": s}


def _pyfile(p: str) -> str:
    if p.startswith("artifact:") or p.startswith("/"):
        return p
    absolute = os.path.abspath(p)
    return absolute + "/" if p.endswith("/") and not absolute.endswith("/") else absolute


def build_spec(a: argparse.Namespace) -> tuple[dict, Optional[str]]:
    """The job spec from the options, and the local file to upload first (if any).
    Checks everything that can be checked before anything is sent."""
    _check_sources(a)
    spec, upload_path = _base_spec(a)
    entry = spec.get("entry") if not a.spec else None
    if entry is not None and not ENTRY_RE.fullmatch(entry):
        raise UsageError(f"--entry {entry!r} must look like package.module:function")
    _apply_options(spec, a)
    return spec, upload_path


def _check_sources(a: argparse.Namespace) -> None:
    """At most one of PATH, --sql and --spec, and no --entry with --sql or --spec."""
    sources = [n for n, v in (("PATH", a.path), ("--sql", a.sql), ("--spec", a.spec)) if v]
    if len(sources) > 1:
        raise UsageError(f"give only one of PATH, --sql and --spec (got {' and '.join(sources)})")
    if a.entry is not None and (a.sql or a.spec):
        raise UsageError("--entry cannot be combined with --sql or --spec")


def _base_spec(a: argparse.Namespace) -> tuple[dict, Optional[str]]:
    """The spec of what to run (--spec, --sql, PATH or --entry), and the file to upload."""
    if a.spec:
        return _read_spec(a.spec), None
    if a.sql is not None:
        if not a.sql.strip():
            raise UsageError("--sql is empty")
        return {"sql": a.sql}, None
    if a.path:
        return _path_spec(a.path, a.entry), a.path
    if a.entry is not None:
        if ":" not in a.entry:
            raise UsageError("--entry must be module:function when no file is given")
        return {"entry": a.entry}, None
    raise UsageError("nothing to submit: give a PATH.py, --entry module:function, "
                     "--sql TEXT or --spec FILE")


def _read_spec(name: str) -> dict:
    """The job spec in the file `name` (- for stdin)."""
    if name == "-":
        text = sys.stdin.read()
    else:
        text = _read_file(name).decode("utf-8", "replace")
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{name}: not valid JSON: {exc}")
    if not isinstance(spec, dict):
        raise UsageError(f"{name}: the job spec must be a JSON object")
    return spec


def _path_spec(path: str, entry: Optional[str]) -> dict:
    """The spec of a local .py, .zip or .egg file (uploaded first), with --entry."""
    if not os.path.isfile(path):
        raise UsageError(f"{path}: no such file")
    if path.endswith(".py"):
        func = entry or "main"
        if ":" in func:
            return {"entry": func}
        stem = os.path.basename(path)[:-3]
        if not IDENT_RE.match(stem):
            raise UsageError(f"{path}: {stem!r} is not a valid Python module name; "
                             "rename the file (letters, digits, '_')")
        if not IDENT_RE.match(func):
            raise UsageError(f"--entry {func!r} is not a function name")
        return {"entry": f"{stem}:{func}"}
    if path.endswith((".zip", ".egg")):
        if not entry or ":" not in entry:
            raise UsageError(f"{path}: give the function to run with --entry "
                             "package.module:function")
        return {"entry": entry}
    raise UsageError(f"{path}: submit a .py, .zip or .egg file")


def read_requirements(path: str) -> list[str]:
    """The entries of a requirements file (the peers check each one again)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_REQUIREMENTS_FILE + 1)
    except OSError as exc:
        raise UsageError(f"--requirements {path}: {exc.strerror or exc}") from None
    try:
        return requirements_file(raw.decode("utf-8"), f"--requirements {path}")
    except UnicodeDecodeError:
        raise UsageError(f"--requirements {path}: not UTF-8 text") from None
    except RequirementsError as exc:
        raise UsageError(str(exc)) from None


def _apply_options(spec: dict, a: argparse.Namespace) -> None:
    """The options that add to any spec: --pyfile, --arg(s), --name, --slots, --jobid,
    --restart-strategy, --from-savepoint and --streaming."""
    if a.pyfile:
        spec["pyfiles"] = list(spec.get("pyfiles") or []) + [_pyfile(p) for p in a.pyfile]
    args = parse_args_kv(a.arg, a.args_json)
    if args is not None:
        merged = dict(spec.get("args") or {}) if isinstance(spec.get("args"), dict) else {}
        merged.update(args)
        spec["args"] = merged
    if a.name is not None:
        spec["name"] = a.name
    if a.slots is not None:
        spec["slots"] = a.slots
    if a.jobid is not None:
        spec["jobid"] = a.jobid
    if a.restart_strategy is not None:
        spec["restart-strategy"] = parse_restart(a.restart_strategy)
    if a.savepoint_path is not None:
        if not a.savepoint_path.strip():
            raise UsageError("--from-savepoint is empty")
        spec["savepoint-path"] = savepoint_location(a.savepoint_path)
        spec.setdefault("job-type", "streaming")
    if a.streaming:
        spec["job-type"] = "streaming"
    if getattr(a, "proxy_user", None):
        spec["proxy-user"] = a.proxy_user
    if getattr(a, "tenant", None):
        spec["tenant"] = a.tenant
    if getattr(a, "requirements", None):
        spec["requirements"] = read_requirements(a.requirements)


def post_job(client: Client, spec: dict) -> dict:
    """POST the spec (with a request id, so a retried request makes one job); the answer
    with its job id."""
    res = client.request("POST", "/jobs", spec, headers={"X-Request-Id": uuid.uuid4().hex})
    if not isinstance(res, dict) or not res.get("jobid"):
        raise CliError(f"unexpected answer to the submission: {one_line(res, 200)}")
    return res


def print_submitted(res: dict, as_json: bool) -> None:
    if as_json:
        print_json(res)
    else:
        out(res["jobid"])
