"""RunParams: what one job process (or SQL-worker statement) is told to run, typed and
frozen, from the JobMaster (or the peer's Spark warm-up) through the executor and the
zygote into the job process (jm/runtime/jobrun.py, sparkapp.py) and the SQL fast path
(jm/cluster/jobs/sqljobs.py).

Its wire form (`to_wire` / `from_wire`) is a plain dict of JSON/msgpack values, used only
for the hop over the zygote's pipe (jm/runtime/zygoteproto.py). `from_wire` is strict: an
unknown or a missing required key raises RunParamsError (a ValueError), which the zygote
answers with its Error message.

Pure: no os, no clock (paths are joined with posixpath: the job runtime is POSIX)."""
from __future__ import annotations

import dataclasses
import posixpath
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Mapping, Optional

from jm.policy.jobs.sinknote import SPARK_CONNECT_LOG
from raft.jobspec import JobSpec

SCRATCH = "spark-local"  # a driver JVM's Spark local dir, in its attempt's run dir


class RunParamsError(ValueError):
    """A wire form that is no RunParams (not a dict, an unknown or a missing key)."""


MAX_FENCE_INTERVAL = 0.5  # seconds: a stopped fence stops its jobs within this


def fence_interval(lease_timeout: float) -> float:
    """How often a job process looks at its fences. A peer or zygote stopped right after
    a renewal leaves its jobs a whole lease: they must be stopped well within it (a
    quarter), and a look costs CPU in every job process (at 10 a second, ~1 ms/s: more
    than its engine spends on an idle query), so no more often than that needs."""
    return min(MAX_FENCE_INTERVAL, lease_timeout / 4)


@dataclass(frozen=True)
class RunParams:
    # who: the job and its attempt (the JobMaster's epoch), the peer that runs it
    job_id: str
    attempt: int
    node: str
    # where: its log, its result and error files (in its run folder), its checkpoints
    log_path: str
    result_path: str
    error_path: str
    checkpoint_dir: str
    # what: an entry ("module:function"), a SQL statement or a script (a local path)
    name: Optional[str] = None
    streaming: bool = False
    entry: Optional[str] = None
    sql: Optional[str] = None
    script: Optional[str] = None
    argv: tuple[str, ...] = ()
    args: Mapping[str, Any] = field(default_factory=dict)
    pyfiles: tuple[str, ...] = ()
    # those of pyfiles and script that are the peer's own copies (its blob store, its
    # user's alone): a job run as another user gets copies in its run folder
    peer_files: tuple[str, ...] = ()
    # (path here, name the user gave) of its script and py-files: what its tracebacks show
    shown_names: tuple[tuple[str, str], ...] = ()
    # its own Python environment (its spec's requirements, jm/cluster/jobs/envs.py): the
    # site-packages put first on its path, and the interpreter Spark's Python workers run
    python_env: Optional[str] = None
    python_exec: Optional[str] = None
    # the interpreter its UDFs run in where Spark is not on this host (a cluster's
    # executors, a spark.remote endpoint): its environment unpacked from spark.archives
    # (None: python_exec)
    executor_python: Optional[str] = None
    restore_path: Optional[str] = None
    cleanup_session: Optional[str] = None  # stop the queries of this session, nothing else
    run_as: Optional[str] = None  # the OS user it runs as (its spec's proxy-user)
    # its tenant's memory limit (bytes) and CPU weight (100: the default share), for the
    # cgroup of the job process and all it starts (a classic job's driver JVM); 0: none
    memory: int = 0
    cpu: int = 0
    # seconds between its looks at the zygote and the peer (fence_interval of the
    # lease): it stops itself while one of them is stopped
    fence_interval: float = MAX_FENCE_INTERVAL
    # Spark: connect (the peer's server) or classic (the job's own driver)
    spark_mode: str = "connect"
    spark_conf: Mapping[str, Any] = field(default_factory=dict)      # the job's spark-conf
    spark_defaults: Mapping[str, Any] = field(default_factory=dict)  # spark.conf.* (classic)
    spark_master: Optional[str] = None
    driver_host: Optional[str] = None
    spark_conf_dir: Optional[str] = None
    class_archive: Optional[str] = None  # spark.class-archive, for a classic job's driver
    scratch_dir: Optional[str] = None
    spark_waiting_after: float = 30.0
    spark_remote: Optional[str] = None
    session_id: Optional[str] = None
    spark_ready_file: Optional[str] = None
    spark_wait: float = 180.0
    spark_log: Optional[str] = None  # the peer's Connect server's output (jobs/sinknote.py)
    # its engine's own token (a tenant's or a job's engine: none other opens to it); None:
    # the peer engine's, in the zygote's environment
    spark_token: Optional[str] = None
    # bounds of what it leaves
    max_result_rows: int = 1000
    max_result_size: int = 256 * 1024
    max_failure_size: int = 16 * 1024

    def __post_init__(self) -> None:
        # immutable whatever the caller passed (a list, a dict), and the numbers typed
        for name in ("argv", "pyfiles", "peer_files"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        for name in ("args", "spark_conf", "spark_defaults"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))
        for name in ("attempt", "max_result_rows", "max_result_size", "max_failure_size",
                     "memory", "cpu"):
            object.__setattr__(self, name, int(getattr(self, name)))
        for name in ("spark_waiting_after", "spark_wait", "fence_interval"):
            object.__setattr__(self, name, float(getattr(self, name)))
        object.__setattr__(self, "streaming", bool(self.streaming))
        pairs = tuple(tuple(p) for p in self.shown_names)
        if not all(len(p) == 2 and all(isinstance(x, str) for x in p) for p in pairs):
            raise ValueError("shown_names must be (path, name) pairs of strings")
        object.__setattr__(self, "shown_names", pairs)

    def to_wire(self) -> dict:
        """A plain dict (lists, dicts, str, numbers, None): msgpack and JSON take it."""
        out: dict = {}
        for f in _FIELDS:
            value = getattr(self, f.name)
            if isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, MappingProxyType):
                value = dict(value)
            out[f.name] = value
        return out

    @classmethod
    def from_wire(cls, d: Any) -> "RunParams":
        """The RunParams of a wire form; RunParamsError if it is none."""
        if not isinstance(d, dict):
            raise RunParamsError(f"run params must be a dict, not {type(d).__name__}")
        unknown = sorted(str(k) for k in d if k not in _NAMES)
        if unknown:
            raise RunParamsError(f"unknown run params: {', '.join(unknown)}")
        missing = [n for n in REQUIRED if n not in d]
        if missing:
            raise RunParamsError(f"missing run params: {', '.join(missing)}")
        try:
            return cls(**d)
        except (TypeError, ValueError) as exc:
            raise RunParamsError(f"bad run params: {exc}") from None


TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # read by the server and pyspark's client

_FIELDS = dataclasses.fields(RunParams)
_NAMES = frozenset(f.name for f in _FIELDS)
REQUIRED = tuple(f.name for f in _FIELDS
                 if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)


@dataclass(frozen=True)
class AttemptPlace:
    """Where an attempt runs and what of its peer it uses (the JobMaster's environment)."""
    job_id: str
    attempt: int          # the JobMaster's epoch
    restart: int
    node: str
    run_dir: str
    log_dir: str
    checkpoint_dir: str
    spark_conf_dir: Optional[str] = None
    spark_remote: Optional[str] = None
    spark_ready_file: Optional[str] = None
    session_id: Optional[str] = None
    pyfiles: tuple[str, ...] = field(default=())
    script: Optional[str] = None
    peer_files: tuple[str, ...] = field(default=())
    shown_names: tuple[tuple[str, str], ...] = field(default=())


def attempt_params(spec: JobSpec, conf: Any, place: AttemptPlace,
                   streaming: bool) -> RunParams:
    """The RunParams of one attempt of a job (its spec, the peer's configuration `conf`)."""
    p, spark = place, conf.spark
    return RunParams(
        job_id=p.job_id, attempt=p.attempt, node=p.node,
        name=spec.name, streaming=streaming,
        entry=spec.entry, sql=spec.sql,
        script=p.script, argv=spec.argv,
        spark_mode=spec.spark_mode,
        spark_conf=dict(spec.spark_conf or {}),
        spark_master=spark.master,
        spark_defaults=spark.defaults,
        driver_host=p.node.rsplit(":", 1)[0],
        spark_conf_dir=p.spark_conf_dir,
        class_archive=spark.class_archive,
        spark_waiting_after=spark.executor_wait_warning,
        args=dict(spec.args), pyfiles=p.pyfiles, peer_files=p.peer_files,
        shown_names=p.shown_names,
        log_path=posixpath.join(p.log_dir, "jobs", p.job_id,
                                f"attempt-{p.attempt}-{p.restart}.log"),
        result_path=posixpath.join(p.run_dir, "result.json"),
        error_path=posixpath.join(p.run_dir, "error.json"),
        scratch_dir=posixpath.join(p.run_dir, SCRATCH),
        checkpoint_dir=p.checkpoint_dir,
        restore_path=spec.savepoint_path,
        run_as=spec.proxy_user or None,
        spark_remote=p.spark_remote,
        session_id=p.session_id,
        spark_ready_file=p.spark_ready_file,
        spark_wait=spark.startup_timeout,
        spark_log=(posixpath.join(p.log_dir, SPARK_CONNECT_LOG)
                   if spark.runs_engines else None),
        max_result_rows=conf["sql.max-result-rows"],
        max_result_size=conf["jobmanager.result.max-size"],
        max_failure_size=conf["jobmanager.failure.max-size"],
        fence_interval=fence_interval(conf.timeouts.lease),
    )


def cleanup_params(params: RunParams, run_dir: str, session_id: str) -> RunParams:
    """The run that stops the streaming queries a killed attempt left in its session (no
    code of the job's: its run folder is its user's by now, nothing is handed over)."""
    return replace(params, entry=None, sql=None, script=None, pyfiles=(), peer_files=(),
                   shown_names=(),
                   cleanup_session=session_id,
                   log_path=params.log_path + ".cleanup",
                   result_path=posixpath.join(run_dir, "cleanup.json"),
                   error_path=posixpath.join(run_dir, "cleanup-error.json"))
