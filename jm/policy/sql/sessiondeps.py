"""What a SQL gateway session brings with it (pure): files, jars, archives and Python
modules as its Spark Connect session's artifacts, and pip requirements as the Python its
UDFs (and a Livy session's code) run in, named by the session's properties the way
spark-submit names them, whichever door opened it (Flink's `properties`, Livy's `conf` or
its `jars`/`pyFiles`/`files`/`archives` fields, the DB-API's):

    spark.jars, spark.files, spark.archives (`ref#alias`), spark.submit.pyFiles
    spark.jm.requirements (one requirement per line: Livy's batches take it too)

Each file is an artifact (`artifact:sha256:...`, uploaded with POST /artifacts) or an
absolute path every peer reads (a Connect session takes local files, not URLs). The
properties stay in the session's replicated record: the session's holder (a new one after
a failover too) adds the files to the session again and takes the environment from its
cache (jm/cluster/sql/sessiondeps.py); they are not set as Spark settings (Spark would refuse
them at runtime).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from jm.policy.jobs.envs import requirement_set
from jm.policy.jobs.reqfile import RequirementsError, livy_requirements
from jm.policy.jobs.submitopts import (ARTIFACT, PACKAGE_PROPERTIES, checked_files, entries,
                                       split_alias)

PYFILES = "spark.submit.pyFiles"
REQUIREMENTS = "spark.jm.requirements"
# Livy's session fields -> the property each one is (as Livy's own server maps them)
LIVY_FIELDS = {"jars": "spark.jars", "files": "spark.files", "archives": "spark.archives",
               "pyFiles": PYFILES}
# a property -> the kind of artifact (SparkSession.addArtifacts' keyword; "" a jar's)
KINDS = {"spark.jars": "", "spark.files": "file", "spark.archives": "archive",
         PYFILES: "pyfile"}
DEPS_PROPERTIES = (*KINDS, REQUIREMENTS)


@dataclass(frozen=True)
class SessionDeps:
    """A session's artifacts ((kind, ref or ref#alias), in the order named) and its
    requirements (a normalised set; () for none)."""
    files: tuple = ()
    requirements: tuple = ()

    def __bool__(self) -> bool:
        return bool(self.files or self.requirements)

    def refs(self) -> list[str]:
        """The uploaded artifacts it names (fetched by the session's holder)."""
        return [ref for _, entry in self.files for ref in (split_alias(entry)[0],)
                if ARTIFACT.fullmatch(ref)]


def session_deps(props: Mapping[str, str]) -> SessionDeps:
    """The session's dependencies from its properties; ValueError with every problem."""
    errors: list[str] = []
    files = []
    for prop, kind in KINDS.items():
        good, bad = checked_files(props, prop, "connect")
        files += [(kind, entry) for entry in good]
        errors += [why.replace("spark-conf ", "property ", 1) for why in bad]
    packages = [p for p in PACKAGE_PROPERTIES if props.get(p) is not None]
    if packages:
        errors.append(f"property {packages[0]}: packages are resolved when a Spark "
                      "application starts; a session's Spark Connect session cannot load "
                      "them (upload the jars and name them in spark.jars)")
    requirements: tuple = ()
    if props.get(REQUIREMENTS) is not None:
        try:
            requirements = requirement_set(livy_requirements(props[REQUIREMENTS]),
                                           REQUIREMENTS).requirements
        except RequirementsError as exc:
            errors += exc.errors
    if errors:
        raise ValueError(errors)
    return SessionDeps(tuple(files), requirements)


def spark_settings(props: Mapping[str, str]) -> dict:
    """The properties a session's Spark session is given as settings: all but its
    dependencies (added as artifacts and an environment instead)."""
    return {k: v for k, v in props.items() if k not in DEPS_PROPERTIES}


def livy_fields(body: Mapping[str, Any]) -> tuple[dict, list[str]]:
    """Livy's `jars`, `pyFiles`, `files`, `archives` of a session request as properties
    (a list each, added after what `conf` names for the same property), and the problems."""
    props, errors = {}, []
    conf = body.get("conf") if isinstance(body.get("conf"), dict) else {}
    for field, prop in LIVY_FIELDS.items():
        value = body.get(field)
        if value in (None, []):
            continue
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            errors.append(f"{field} must be a list of strings (artifacts or absolute paths)")
            continue
        props[prop] = ",".join([*entries(conf.get(prop) or ""), *value])
    return props, errors
