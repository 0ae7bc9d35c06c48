"""A job's spec as it was accepted: typed and frozen (pure data).

jm/policy/jobs/spec.py `prepare_submission` makes one from what a client sent (or refuses
it); every reader after that reads attributes. Its wire form (`wire()`, `from_wire`) is
the JSON object REST shows and the Raft commands carry (`SubmitJob.spec`), the same
dashed keys as a submission's; a job's replicated record (raft/records.py JobRecord) holds
the JobSpec and pickles its wire form, so that snapshots hold plain data whatever the
build. A key a newer build adds needs a protocol (raft/protocol.py SPEC_KEYS): an older
replica would drop it here.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping, Optional

BATCH, STREAMING = "batch", "streaming"
CONNECT, CLASSIC = "connect", "classic"


@dataclass(frozen=True)
class JobSpec:
    jobid: str
    name: str
    entry: Optional[str] = None      # package.module:function
    sql: Optional[str] = None        # a SQL job's statement
    script: Optional[str] = None     # an application: a path, URI or artifact:sha256:...
    argv: tuple[str, ...] = ()       # the script's arguments
    args: Mapping[str, Any] = field(default_factory=dict)  # an entry's (a JSON object)
    pyfiles: tuple[str, ...] = ()
    slots: int = 1
    job_type: str = BATCH
    spark_mode: str = CONNECT
    spark_conf: Optional[Mapping[str, str]] = None  # None: none given
    restart_strategy: Optional[Mapping[str, Any]] = None  # the job's own override
    savepoint_path: Optional[str] = None  # a streaming job starts from it
    tenant: Optional[str] = None
    proxy_user: Optional[str] = None  # the OS user it runs as
    requirements: tuple[str, ...] = ()  # its Python packages (one environment a set)

    def __post_init__(self) -> None:  # (its mappings read-only too, as RunParams's)
        for name in ("args", "spark_conf", "restart_strategy"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, MappingProxyType):
                object.__setattr__(self, name, MappingProxyType(dict(value)))

    @property
    def streaming(self) -> bool:
        return self.job_type == STREAMING

    @property
    def classic(self) -> bool:
        """A driver of its own (spark-submit), not a session on a Connect server."""
        return self.spark_mode == CLASSIC

    def code_refs(self) -> list[str]:
        """Its code: the py-files, then the script (if any)."""
        return list(self.pyfiles) + ([self.script] if self.script is not None else [])

    def wire(self) -> dict:
        """The JSON form (as submitted, defaults filled in)."""
        out: dict[str, Any] = {"jobid": self.jobid, "name": self.name}
        for key, value in (("entry", self.entry), ("sql", self.sql),
                           ("script", self.script)):
            if value is not None:
                out[key] = value
        if self.script is not None:
            out["argv"] = list(self.argv)
        out.update({"args": dict(self.args), "pyfiles": list(self.pyfiles),
                    "slots": self.slots, "job-type": self.job_type,
                    "spark-mode": self.spark_mode})
        for key, value in (("spark-conf", self.spark_conf),
                           ("restart-strategy", self.restart_strategy)):
            if value is not None:
                out[key] = dict(value)
        for key, value in (("savepoint-path", self.savepoint_path), ("tenant", self.tenant),
                           ("proxy-user", self.proxy_user)):
            if value is not None:
                out[key] = value
        if self.requirements:
            out["requirements"] = list(self.requirements)
        return out

    @staticmethod
    def from_wire(d: Mapping[str, Any], jobid: Optional[str] = None) -> "JobSpec":
        """The spec of a wire form (jm/policy/jobs/spec.py made it valid; a field of the
        wrong type in a command made some other way takes its default: applying a command
        never fails on its spec). `jobid`: the job's id, over the wire form's own. Every
        replica reads every submitted job's spec with this: one pass over tables, no
        helper calls per field."""
        get = d.get
        kw: dict[str, Any] = {}
        for key, attr in _TEXT_FIELDS:
            value = get(key)
            if value is not None and isinstance(value, str):
                kw[attr] = value
        for key, attr in _TEXTS_FIELDS:
            value = get(key)
            if value is not None and isinstance(value, (list, tuple)):
                kw[attr] = tuple([v for v in value if isinstance(v, str)])
        for key, attr in _MAPPING_FIELDS:
            value = get(key)
            if value is not None and (isinstance(value, dict) or isinstance(value, Mapping)):
                kw[attr] = MappingProxyType(dict(value))
        given = kw.pop("jobid", "")
        if jobid is None:
            jobid = given
        elif not isinstance(jobid, str):  # (read as a wire form's id of another type)
            jobid = ""
        kw.setdefault("args", MappingProxyType({}))
        kw["job_type"] = kw.get("job_type") or BATCH
        kw["spark_mode"] = kw.get("spark_mode") or (CLASSIC if "script" in kw else CONNECT)
        slots = get("slots", 1)
        return JobSpec(jobid=jobid, name=kw.pop("name", None) or jobid,
                       slots=slots if type(slots) is int and slots >= 1 else _slots(slots),
                       **kw)


# (wire key, attribute) of the text fields, the lists of texts and the mappings
_TEXT_FIELDS = (("jobid", "jobid"), ("name", "name"), ("entry", "entry"), ("sql", "sql"),
                ("script", "script"), ("job-type", "job_type"), ("spark-mode", "spark_mode"),
                ("savepoint-path", "savepoint_path"), ("tenant", "tenant"),
                ("proxy-user", "proxy_user"))
_TEXTS_FIELDS = (("argv", "argv"), ("pyfiles", "pyfiles"), ("requirements", "requirements"))
_MAPPING_FIELDS = (("args", "args"), ("spark-conf", "spark_conf"),
                   ("restart-strategy", "restart_strategy"))


def _slots(value: Any) -> int:
    try:
        n = int(value) if not isinstance(value, bool) else 1
    except (TypeError, ValueError):
        return 1
    return n if n >= 1 else 1


WIRE_TYPES: dict[str, tuple] = {
    "jobid": (str,), "name": (str,), "entry": (str,), "sql": (str,), "script": (str,),
    "argv": (list, tuple), "args": (dict,), "pyfiles": (list, tuple), "slots": (int,),
    "job-type": (str,), "spark-mode": (str,), "spark-conf": (dict,),
    "restart-strategy": (dict,), "savepoint-path": (str,), "tenant": (str,),
    "proxy-user": (str,), "requirements": (list, tuple)}


def _wrong(key: str, value: Any, types: tuple) -> bool:
    return value is not None and (not isinstance(value, types)
                                  or key == "slots" and isinstance(value, bool))


def wire_problems(d: Any) -> list[str]:
    """What a wire form holds that no submission could (a command made some other way):
    the fields of the wrong type (the usual answer, none, found in one pass over the
    spec's own keys; the problems listed in WIRE_TYPES' order)."""
    if not isinstance(d, dict):
        return ["a job's spec is a JSON object"]
    for key, value in d.items():
        types = WIRE_TYPES.get(key)
        if types is not None and value is not None and type(value) not in types:
            break  # (not exactly of one of its types: a subclass, a bool, or wrong)
    else:
        return []
    return [f"{key} must be of type {'/'.join(t.__name__ for t in types)}"
            for key, types in WIRE_TYPES.items() if _wrong(key, d.get(key), types)]
