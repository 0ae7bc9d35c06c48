"""Validation of job specs as submitted through REST or the CLI (pure)."""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from jm.fastjson import compact_size
from jm.policy.jobs import fsuri
from jm.policy.jobs.bounds import json_size
from jm.policy.jobs.envs import RequirementsError, requirement_set
from jm.policy.jobs.restart import validate_override
from jm.policy.jobs.submitopts import submit_errors

FIELDS = {"name", "entry", "pyfiles", "args", "sql", "jobid", "slots", "restart-strategy",
          "savepoint-path", "job-type", "script", "argv", "spark-mode", "spark-conf",
          "tenant", "proxy-user", "requirements"}
JOB_TYPES = ("batch", "streaming")
SPARK_MODES = ("classic", "connect")
# Spark properties a job may not set: where its driver runs and what fences it are the
# cluster's (a driver elsewhere, or another master, would escape the attempt's fencing)
FORBIDDEN_SPARK_KEYS = ("spark.master", "spark.remote", "spark.submit.deployMode",
                        "spark.api.mode", "spark.connect.grpc.binding.port")
FORBIDDEN_SPARK_PREFIXES = ("spark.jm.",)
SCRIPT_SUFFIXES = (".py", ".zip")
from jm.policy.jobs.vocab import ENTRY_RE  # (package.module:function)
JOBID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
TENANT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")   # raft/tenants.py NAME
USER_RE = re.compile(r"[a-z_][a-z0-9_-]{0,31}")                # a POSIX user name
ARTIFACT_RE = re.compile(r"^artifact:sha256:[0-9a-f]{64}$")
MAX_NAME = 200
RESERVED_IDS = {"overview"}  # would collide with GET /jobs/overview


class SpecError(ValueError):
    """A list of problems with a submitted spec."""
    status = 400

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


class SpecTooLarge(SpecError):
    """A spec, or its args or sql, over its byte limit (HTTP 413, naming the key)."""
    status = 413


@dataclass(frozen=True)
class SpecLimits:
    """Byte limits of a submitted spec (jobmanager.spec.max-size, .max-args-size,
    .max-sql-size), measured as compact UTF-8 JSON (the sql as its text)."""
    spec: int = 1024 * 1024
    args: int = 256 * 1024
    sql: int = 256 * 1024

    @staticmethod
    def from_conf(conf: Any) -> "SpecLimits":
        return SpecLimits(conf["jobmanager.spec.max-size"],
                          conf["jobmanager.spec.max-args-size"],
                          conf["jobmanager.spec.max-sql-size"])


def size_errors(spec: dict, limits: SpecLimits) -> list[str]:
    """Problems of a spec's size (and of text the replicated state cannot hold)."""
    try:
        size = compact_size(spec)
    except UnicodeEncodeError:
        return ["the spec holds text that is not valid Unicode (a lone surrogate such as "
                "\\udcff); send UTF-8 text"]
    except (TypeError, ValueError) as exc:
        return [f"the spec is not plain JSON: {exc}"]
    if size > limits.spec:
        return [f"the job spec is {size} bytes, more than jobmanager.spec.max-size "
                f"({limits.spec} bytes); pass large inputs as files or artifacts"]
    errors = []
    args = spec.get("args")
    if args is not None and (n := json_size(args)) > limits.args:
        errors.append(f"args is {n} bytes, more than jobmanager.spec.max-args-size "
                      f"({limits.args} bytes)")
    sql = spec.get("sql")
    if isinstance(sql, str) and (n := len(sql.encode("utf-8"))) > limits.sql:
        errors.append(f"sql is {n} bytes, more than jobmanager.spec.max-sql-size "
                      f"({limits.sql} bytes)")
    return errors


def proxy_refusal(user: str, allowed: tuple, field: str, what: str = "jobs",
                  tenant: str | None = None, tenant_users: tuple = ()) -> str | None:
    """Why `user` may not be the OS user `what` run as, or None: the peers allow it
    (jobmanager.executor.proxy-users), and so does the tenant of the work, if it has one
    (its proxy-users: a user bound to the tenants granted it, so that one tenant's work
    cannot run as the user of another's)."""
    if user not in allowed:
        return (f"{field}: {what} may not run as {user!r} (allowed by "
                f"jobmanager.executor.proxy-users: {', '.join(allowed) or 'nobody'})")
    if tenant is not None and user not in tenant_users:
        return (f"{field}: tenant {tenant}'s {what} may not run as {user!r} (its proxy "
                f"users: {', '.join(tenant_users) or 'none'}; jm tenant set {tenant} "
                "--proxy-users ...)")
    return None


def new_job_id() -> str:
    return uuid.uuid4().hex


def validate_spec(spec: Any, max_slots: int | None = None,
                  limits: SpecLimits | None = None) -> dict:
    """Return a normalised spec (with a jobid) or raise SpecError listing every problem
    (SpecTooLarge, first, for a spec or field over its byte limit)."""
    if not isinstance(spec, dict):
        raise SpecError(["the job spec must be a JSON object"])
    too_large = size_errors(spec, limits or SpecLimits())
    if too_large:
        raise (SpecTooLarge if "jobmanager.spec." in too_large[0] else SpecError)(too_large)
    errors = _code_errors(spec)
    errors += _identity_errors(spec, max_slots)
    errors += _pyfiles_errors(spec.get("pyfiles", []))
    if not isinstance(spec.get("args", {}), dict):
        errors.append("args must be a JSON object")
    job_type = spec.get("job-type", "batch")
    errors += _job_type_errors(job_type, spec.get("sql"))
    sp, sp_errors = _savepoint_path(spec.get("savepoint-path"), job_type)
    rs, rs_errors = _restart_strategy(spec.get("restart-strategy"))
    errors += sp_errors + rs_errors
    reqs = None
    if spec.get("requirements") and spec.get("sql") is not None:
        errors.append("requirements: a SQL job runs no Python of its own (give an entry or "
                      "a script)")
    elif spec.get("requirements") is not None:
        try:
            reqs = list(requirement_set(spec["requirements"]).requirements)
        except RequirementsError as exc:
            errors += exc.errors
    if errors:
        raise SpecError(errors)
    out = _normalised(spec, job_type, sp, rs)
    out.pop("requirements", None)
    if reqs:
        out["requirements"] = reqs  # (in one spelling: the same set, one environment)
    return out


def _code_errors(spec: dict) -> list[str]:
    """Problems of the fields, of what the job runs (one of entry, sql and script) and of
    its Spark settings."""
    errors = []
    unknown = sorted(set(spec) - FIELDS)
    if unknown:
        errors.append(f"unknown field(s): {', '.join(unknown)}")
    entry, sql, script = spec.get("entry"), spec.get("sql"), spec.get("script")
    if sum(x is not None for x in (entry, sql, script)) != 1:
        errors.append("give exactly one of 'entry' (module:function), 'sql' and 'script' "
                      "(a .py or .zip application)")
    if entry is not None and (not isinstance(entry, str) or not ENTRY_RE.fullmatch(entry)):
        errors.append("entry must look like 'package.module:function'")
    if sql is not None and (not isinstance(sql, str) or not sql.strip()):
        errors.append("sql must be a non-empty string")
    errors += _script_errors(script, spec.get("argv"))
    errors += _spark_errors(spec.get("spark-mode"), spec.get("spark-conf"))
    if isinstance(spec.get("spark-conf"), dict):  # spark-submit's --jars, --packages...
        mode = spec.get("spark-mode") or ("classic" if script is not None else "connect")
        errors += submit_errors(spec["spark-conf"], mode)
    return errors


def _identity_errors(spec: dict, max_slots: int | None) -> list[str]:
    """Problems of the name, the jobid and the slots."""
    errors = []
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
    tenant, user = spec.get("tenant"), spec.get("proxy-user")
    if tenant is not None and (not isinstance(tenant, str) or not TENANT_RE.fullmatch(tenant)):
        errors.append("tenant must be 1-64 letters, digits, '.', '_' or '-', starting with a "
                      "letter or digit")
    if user is not None and (not isinstance(user, str) or not USER_RE.fullmatch(user)):
        errors.append("proxy-user must be a user name (lower-case letters, digits, '_' or "
                      "'-', at most 32)")
    return errors


def _pyfiles_errors(pyfiles: Any) -> list[str]:
    if not isinstance(pyfiles, list) or not all(isinstance(p, str) for p in pyfiles):
        return ["pyfiles must be a list of strings"]
    errors = []
    for p in pyfiles:
        errors += _code_ref_errors("pyfiles", p, (".py", ".zip", ".egg", "/"),
                                   "a .py, .zip or .egg file or a directory/")
    return errors


def _job_type_errors(job_type: Any, sql: Any) -> list[str]:
    if job_type not in JOB_TYPES:
        return ["job-type must be 'batch' (the default) or 'streaming' (moved by "
                "rebalancing and drain, savepoints)"]
    if sql is not None and job_type == "streaming":
        return ["a SQL job is a batch job; job-type 'streaming' needs an entry or a "
                "script"]
    return []


def _savepoint_path(sp: Any, job_type: Any) -> tuple[Any, list[str]]:
    """The savepoint-path in its canonical spelling (a path or a URI: s3://, gs://,
    hdfs://), and its problems."""
    if sp is None:
        return None, []
    try:
        sp = fsuri.location(sp, "savepoint-path")
    except ValueError as exc:
        return sp, [f"{exc} (a savepoint's location)"]
    if job_type != "streaming":
        return sp, ["savepoint-path needs \"job-type\": \"streaming\""]
    return sp, []


def _restart_strategy(rs: Any) -> tuple[Any, list[str]]:
    """The restart-strategy override as validate_override normalises it, and its
    problems."""
    if rs is None:
        return None, []
    try:
        return validate_override(rs), []
    except ValueError as exc:
        return rs, [str(exc)]


def _normalised(spec: dict, job_type: str, sp: Any, rs: Any) -> dict:
    """The valid spec with its defaults filled in and its references canonical."""
    entry, script = spec.get("entry"), spec.get("script")
    out = {k: v for k, v in spec.items() if v is not None}
    out["jobid"] = spec.get("jobid") or new_job_id()
    out["slots"] = spec.get("slots", 1)
    out["job-type"] = job_type
    if sp is not None:
        out["savepoint-path"] = sp
    out.setdefault("args", {})
    out["pyfiles"] = [_canonical_ref(p) for p in out.get("pyfiles", [])]
    if script is not None:
        out["script"] = _canonical_ref(script)
        out.setdefault("argv", [])
    out["spark-mode"] = spec.get("spark-mode") or ("classic" if script is not None
                                                   else "connect")
    if out.get("spark-conf") is not None:
        out["spark-conf"] = {k: spark_value(v) for k, v in out["spark-conf"].items()}
    if rs is not None:
        out["restart-strategy"] = rs
    if not out.get("name"):
        out["name"] = entry or (script_name(script) if script is not None else "sql")
    return out


def script_name(script: str) -> str:
    """The file name of a script path or URI (an artifact's name is only known to the
    store)."""
    return script.rsplit("/", 1)[-1] if not script.startswith("artifact:") else "script"


def spark_value(value: Any) -> str:
    """A Spark property value as Spark reads it (true/false, not True/False)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _code_ref_errors(field: str, ref: str, suffixes: tuple, what: str) -> list[str]:
    """Problems of one code reference: an artifact id, an absolute path of `what`, or a
    URI of one on a remote file system (copied into an artifact when submitted)."""
    if ref.startswith("artifact:"):
        if not ARTIFACT_RE.fullmatch(ref):
            return [f"{field}: {ref!r} is not artifact:sha256:<64 hex digits>"]
    elif fsuri.is_remote_ref(ref):
        try:
            loc = fsuri.location(ref, field)
        except ValueError as exc:
            return [str(exc)]
        if not loc.endswith(tuple(s for s in suffixes if s != "/")):
            return [f"{field}: {ref!r} must be {what.replace(' or a directory/', '')}"]
    elif not ref.startswith("/"):
        return [f"{field}: {ref!r} must be an absolute path every peer can read, a URI "
                "(s3://, gs://, hdfs://) or an artifact:sha256:... id"]
    elif not ref.endswith(suffixes):
        return [f"{field}: {ref!r} must be {what}"]
    return []


def remote_refs(spec: dict) -> list[tuple[str, str]]:
    """The code references of a valid spec on remote file systems, as (field, URI): the
    peer that takes the submission copies each into an artifact and puts `artifact:<id>`
    in its place (as spark-submit downloads a remote application)."""
    refs = [("script", p) for p in [spec.get("script")] if isinstance(p, str)]
    refs += [("pyfiles", p) for p in spec.get("pyfiles", [])]
    return [(f, p) for f, p in refs if fsuri.is_remote_ref(p)]


def _canonical_ref(ref: str) -> str:
    return fsuri.location(ref) if fsuri.is_remote_ref(ref) else ref


def _script_errors(script: Any, argv: Any) -> list[str]:
    errors = []
    if script is not None:
        if not isinstance(script, str) or not script:
            errors.append("script must be a string: an absolute path or a URI (s3://, "
                          "gs://, hdfs://) of a .py or .zip file, or an artifact:sha256:... id")
        else:
            errors += _code_ref_errors("script", script, SCRIPT_SUFFIXES,
                                       "a .py file or a .zip with a __main__.py")
    if argv is not None:
        if script is None:
            errors.append("argv is for script jobs (an entry job reads 'args')")
        elif not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            errors.append("argv must be a list of strings")
    return errors


def _spark_errors(mode: Any, conf: Any) -> list[str]:
    errors = []
    if mode is not None and mode not in SPARK_MODES:
        errors.append(f"spark-mode must be one of {', '.join(SPARK_MODES)} (got {mode!r})")
    if conf is None:
        return errors
    if not isinstance(conf, dict):
        return errors + ["spark-conf must be an object of Spark properties "
                         "({\"spark.executor.memory\": \"2g\"})"]
    for key, value in conf.items():
        if not key.startswith("spark."):
            errors.append(f"spark-conf: {key!r} is not a Spark property (spark.*)")
        elif key in FORBIDDEN_SPARK_KEYS or key.startswith(FORBIDDEN_SPARK_PREFIXES):
            errors.append(f"spark-conf: {key} is set by the cluster and cannot be changed "
                          "by a job")
        if value is None or isinstance(value, (dict, list)):
            errors.append(f"spark-conf: the value of {key!r} must be a string, number or "
                          "boolean")
    return errors
