"""Apache Livy's batch API on our jobs (pure): a Livy batch is an application-mode script
job (`{"script": ...}`), so Airflow's Livy operator and other Livy clients submit PySpark
applications unchanged. Batch ids are the jobs' numbers (Livy's ids are integers).

Request fields: `file` (the application: an absolute path every peer can read, `local:` or
`file://` URLs of one, an `artifact:sha256:...` id, or a URI of a remote file system the
peers reach, `s3://` (`s3a://`), `gs://`, `hdfs://`: the peer that takes the request copies
it into the cluster's artifacts before the job is submitted, as spark-submit downloads a
remote application), `args`, `pyFiles` (the same kinds), `name`, `conf`
(Spark properties), and the Spark shorthands `driverMemory`, `driverCores`,
`executorMemory`, `executorCores`, `numExecutors`, `queue`, `jars`, `files`, `archives`
(as their spark.* properties), and `proxyUser` (the job's `proxy-user`: the OS user it
runs as, where jobmanager.executor.proxy-users allows it). `className` (JVM
applications) is refused with a clear error.
"""
from __future__ import annotations

from typing import Any, Optional

from jm.policy.jobs import fsuri
from jm.policy.jobs.reqfile import RequirementsError, livy_requirements
from raft.records import (CANCELED, CANCELLING, CREATED, FAILED, FINISHED, INITIALIZING,
                          RESTARTING, RUNNING, JobRecord)

STATES = {CREATED: "starting", INITIALIZING: "starting", RUNNING: "running",
          RESTARTING: "recovering", CANCELLING: "shutting_down", FINISHED: "success",
          FAILED: "dead", CANCELED: "killed"}
SHORTHANDS = {"driverMemory": "spark.driver.memory", "driverCores": "spark.driver.cores",
              "executorMemory": "spark.executor.memory",
              "executorCores": "spark.executor.cores",
              "numExecutors": "spark.executor.instances", "queue": "spark.yarn.queue"}
LISTS = {"jars": "spark.jars", "files": "spark.files", "archives": "spark.archives"}
KNOWN = {"file", "args", "pyFiles", "name", "conf", "className", "proxyUser",
         *SHORTHANDS, *LISTS}
FIELD_NAMES = {"script": "file", "pyfiles": "pyFiles",   # our spec's -> Livy's
               "proxy-user": "proxyUser"}
VERSION = "0.8.0-incubating"  # the Livy API this follows (GET /version)


def _path(field: str, url: Any, errors: list) -> Optional[str]:
    """A Livy URL as one of our code references (an absolute path or an artifact id)."""
    if not isinstance(url, str) or not url.strip():
        errors.append(f"{field} must be a non-empty string")
        return None
    u = url.strip()
    for prefix in ("local://", "local:", "file://"):
        if u.startswith(prefix):
            u = u[len(prefix):]
            break
    if u.startswith("artifact:") or u.startswith("/"):
        return u
    scheme = u.split("://", 1)[0].lower() if "://" in u else None
    if scheme in fsuri.REMOTE_SCHEMES:
        try:  # copied into an artifact by the peer (jm/policy/jobs/spec.py remote_refs)
            return fsuri.location(u, field)
        except ValueError as exc:
            errors.append(str(exc))
            return None
    errors.append(f"{field} {url!r}: " + (
        f"{scheme}:// is not readable by the peers; give an absolute path every peer can "
        "read, a URI of s3://, gs:// or hdfs://, or upload it (POST /artifacts) and give "
        "its artifact:sha256:... id"
        if scheme else "must be an absolute path, a URI (s3://, gs://, hdfs://) or an "
                       "artifact:sha256:... id"))
    return None


REQUIREMENTS_CONF = "spark.jm.requirements"  # conf: the job's pip requirements


def batch_spec(body: Any) -> dict:
    """A Livy batch request -> our job spec (still validated as any spec is). ValueError
    with every problem found."""
    if not isinstance(body, dict):
        raise ValueError(["the body must be a JSON object (a Livy batch request)"])
    errors: list = []
    unknown = sorted(set(body) - KNOWN)
    if unknown:
        errors.append(f"unknown field(s): {', '.join(unknown)}")
    if body.get("className"):
        errors.append("className: only Python applications (a .py or .zip file) run here")
    spec: dict = {"script": _path("file", body.get("file"), errors)}
    args = body.get("args")
    if args is not None:
        if not isinstance(args, list):
            errors.append("args must be a list")
        else:
            spec["argv"] = [a if isinstance(a, str) else str(a) for a in args]
    py = body.get("pyFiles")
    if py is not None:
        if not isinstance(py, list):
            errors.append("pyFiles must be a list")
        else:
            spec["pyfiles"] = [p for p in (_path("pyFiles", f, errors) for f in py) if p]
    if body.get("name") is not None:
        spec["name"] = body["name"]
    if body.get("proxyUser") is not None:
        spec["proxy-user"] = body["proxyUser"]
    conf = body.get("conf")
    if conf is not None and not isinstance(conf, dict):
        errors.append("conf must be an object of Spark properties")
        conf = None
    spark = dict(conf or {})
    for field, key in SHORTHANDS.items():
        if body.get(field) is not None:
            spark[key] = body[field]
    for field, key in LISTS.items():
        value = body.get(field)
        if value is not None:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                errors.append(f"{field} must be a list of strings")
            else:
                spark[key] = ",".join(value)
    if spark.get(REQUIREMENTS_CONF) is not None:  # a job's own Python requirements
        try:
            spec["requirements"] = livy_requirements(spark.pop(REQUIREMENTS_CONF))
        except RequirementsError as exc:
            errors += exc.errors
    if spark:
        spec["spark-conf"] = spark
    if errors:
        raise ValueError(errors)
    return spec


def batch(job: JobRecord, log: Optional[list] = None) -> dict:
    """A job as a Livy batch object."""
    apps = (job.attempts[-1].spark or []) if job.attempts else []
    app = apps[-1] if apps and isinstance(apps[-1], dict) else {}
    app_id, ui = app.get("spark-app-id"), app.get("spark-ui")
    return {"id": job.number, "name": job.name, "owner": job.submitter or None,
            "proxyUser": job.spec.proxy_user,
            "state": STATES.get(job.status, "starting"), "appId": app_id,
            "appInfo": {"driverLogUrl": None, "sparkUiUrl": ui},
            "log": list(log or []), "jobid": job.id}


def batches(jobs: list, start: int, size: int) -> dict:
    """GET /batches: the script jobs, oldest first, `size` of them from `start`."""
    mine = sorted((j for j in jobs if j.number and j.spec.script is not None),
                  key=lambda j: j.number)
    return {"from": start, "total": len(mine),
            "sessions": [batch(j) for j in mine[start:start + size]]}


def log_page(text: str, start: Optional[int], size: Optional[int]) -> tuple[int, int, list]:
    """GET /batches/{id}/log: (from, total, lines). Livy's default is the last 100 lines."""
    lines = text.splitlines()
    total = len(lines)
    size = 100 if size is None else max(0, size)
    if start is None:
        start = max(0, total - size)
    start = max(0, min(start, total))
    return start, total, lines[start:start + size]
