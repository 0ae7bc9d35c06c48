"""spark-submit's dependency and resource options as the Spark properties spark-submit
maps them to, and the checks of those properties in a job's `spark-conf` (pure, standard
library only: `jm run` uses it on the client's side, the peers again on theirs).

Files a job names (`spark.jars`, `spark.files`, `spark.archives`) are artifacts
(`artifact:sha256:...`, what `jm run` uploads a local file as), absolute paths every peer
can read, or https:// URLs Spark fetches itself; an archive may carry spark-submit's
`#alias` (the folder name it is unpacked as). Packages are Maven coordinates that Spark's
own Ivy resolution fetches (classic mode: a Connect session cannot load them).
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Optional

# spark-submit's option -> the Spark property it sets (as SparkSubmitArguments does)
SUBMIT_OPTIONS = {
    "--jars": "spark.jars", "--files": "spark.files", "--archives": "spark.archives",
    "--packages": "spark.jars.packages", "--repositories": "spark.jars.repositories",
    "--exclude-packages": "spark.jars.excludes",
    "--driver-memory": "spark.driver.memory", "--driver-cores": "spark.driver.cores",
    "--executor-memory": "spark.executor.memory", "--executor-cores": "spark.executor.cores",
    "--num-executors": "spark.executor.instances",
    "--total-executor-cores": "spark.cores.max",
}
FILE_PROPERTIES = ("spark.jars", "spark.files", "spark.archives")
PACKAGE_PROPERTIES = ("spark.jars.packages", "spark.jars.repositories", "spark.jars.excludes")
ARTIFACT = re.compile(r"artifact:sha256:[0-9a-f]{64}")
_COORDINATE = re.compile(r"[A-Za-z0-9_.\-]+:[A-Za-z0-9_.\-]+:[A-Za-z0-9_.+\-]+")
_EXCLUSION = re.compile(r"[A-Za-z0-9_.\-]+:[A-Za-z0-9_.\-]+")
_ALIAS = re.compile(r"[A-Za-z0-9_.\-]{1,100}")
MAX_ENTRIES = 100


def entries(value: Any) -> list[str]:
    """A comma-separated property (or a list) as its entries."""
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return [str(i).strip() for i in items if str(i).strip()]


def split_alias(entry: str) -> tuple[str, Optional[str]]:
    """("ref", "alias") of an archive's `ref#alias` (None: none)."""
    ref, hash_, alias = entry.partition("#")
    return ref, (alias if hash_ else None)


def file_error(prop: str, entry: str, mode: str) -> Optional[str]:
    ref, alias = split_alias(entry)
    if alias is not None and (prop != "spark.archives" or not _ALIAS.fullmatch(alias)):
        return (f"spark-conf {prop}: {entry!r}: only an archive takes '#name' (letters, "
                "digits, '.', '_', '-')")
    if ref.startswith("https://") and mode != "classic":
        return (f"spark-conf {prop}: {ref!r}: a Connect session takes local files only "
                "(jm run uploads them), not URLs")
    if ARTIFACT.fullmatch(ref) or ref.startswith("https://") or \
            (ref.startswith("/") and "\x00" not in ref):
        return None
    return (f"spark-conf {prop}: {ref!r} is not an artifact (artifact:sha256:...; jm run "
            "uploads a local file), an absolute path every peer reads, or an https:// URL")


def checked_files(conf: Mapping[str, Any], prop: str, mode: str) -> tuple[list, list]:
    """(the good entries, what is wrong with the others) of file property `prop`."""
    found = entries(conf.get(prop) or "")
    if len(found) > MAX_ENTRIES:
        return [], [f"spark-conf {prop}: at most {MAX_ENTRIES} entries"]
    checked = [(x, file_error(prop, x, mode)) for x in found]
    return [x for x, e in checked if not e], [e for _, e in checked if e]


def submit_errors(conf: dict, mode: str) -> list[str]:
    """What is wrong with a job's dependency properties, one line each."""
    errors = []
    for prop in FILE_PROPERTIES:
        errors += checked_files(conf, prop, mode)[1]
    packages = [p for p in PACKAGE_PROPERTIES if conf.get(p) is not None]
    if packages and mode != "classic":
        errors.append(f"spark-conf {packages[0]}: packages are resolved when a Spark "
                      "application starts: give spark-mode classic (a Connect session "
                      "cannot load them)")
    for coordinate in entries(conf.get("spark.jars.packages") or ""):
        if not _COORDINATE.fullmatch(coordinate):
            errors.append(f"spark-conf spark.jars.packages: {coordinate!r} is not a Maven "
                          "coordinate group:artifact:version")
    for exclusion in entries(conf.get("spark.jars.excludes") or ""):
        if not _EXCLUSION.fullmatch(exclusion):
            errors.append(f"spark-conf spark.jars.excludes: {exclusion!r} is not "
                          "group:artifact")
    for url in entries(conf.get("spark.jars.repositories") or ""):
        if not url.startswith(("https://", "http://")):
            errors.append(f"spark-conf spark.jars.repositories: {url!r} is not an http(s) "
                          "URL")
    return errors


def artifact_refs(conf: dict) -> list[str]:
    """The artifacts a job's file properties name (checked at submission, fetched by the
    peer that runs it)."""
    return [ref for prop in FILE_PROPERTIES for ref, _ in
            (split_alias(e) for e in entries(conf.get(prop) or "")) if ARTIFACT.fullmatch(ref)]


def with_local_files(conf: dict, local: dict) -> dict:
    """`conf` with each artifact of its file properties replaced by its local path
    (`local`: ref -> path), an archive's alias kept."""
    out = dict(conf)
    for prop in FILE_PROPERTIES:
        if conf.get(prop) is None:
            continue
        done = []
        for entry in entries(conf[prop]):
            ref, alias = split_alias(entry)
            path = local.get(ref, ref)
            done.append(path if alias is None else f"{path}#{alias}")
        out[prop] = ",".join(done)
    return out


ENV_ALIAS = "jm-python"  # the folder a job's packed environment is unpacked as


def with_packed_env(conf: dict, archive: str) -> tuple[dict, str]:
    """A classic-mode job's properties with its packed environment among its archives,
    and the interpreter its executors run (spark-submit's way for a venv on a cluster:
    `--archives env.tar.gz#env`, `PYSPARK_PYTHON=./env/bin/python`)."""
    out = dict(conf)
    out["spark.archives"] = ",".join([*entries(conf.get("spark.archives") or ""),
                                      f"{archive}#{ENV_ALIAS}"])
    return out, f"./{ENV_ALIAS}/bin/python"


def local_files(conf: dict, props: Iterable[str] = FILE_PROPERTIES) -> list[str]:
    """The local paths a job's file properties name (an archive's alias dropped)."""
    return [ref for prop in props for ref, _ in (split_alias(e) for e in
                                                 entries(conf.get(prop) or ""))
            if ref.startswith("/")]
