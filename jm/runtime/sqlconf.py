"""A SQL gateway session's Spark settings in the SQL worker (jm/runtime/sqlworker.py):

* its properties (set when the session opens) are its defaults: a bare `RESET` goes back
  to them, as Flink's gateway does, not to the server's (Spark's RESET alone would drop
  them), both when it runs and when it is replayed on the session's next peer;
* a statement's `executionConfig` (Flink's) is its own: set for it, then the keys it set
  go back to what they were, unless the statement itself changed them (a SET of the
  same key)."""
from __future__ import annotations

import os
import re
from typing import Any, Optional

_BARE_RESET = re.compile(r"\s*RESET\s*;?\s*", re.I)
_UNSET = object()
UDF_PYTHON = "spark.sql.execution.pyspark.python"  # a Connect session's UDF interpreter


def is_bare_reset(statement: str) -> bool:
    return bool(_BARE_RESET.fullmatch(statement))


def set_properties(spark: Any, properties: dict, error_text=str) -> list:
    """Set each property; the errors (one line each), not raised."""
    errors = []
    for key, value in (properties or {}).items():
        try:
            spark.conf.set(str(key), str(value))
        except Exception as exc:
            errors.append(f"property {key}: {error_text(exc)[:500]}")
    return errors


def add_deps(spark: Any, artifacts: tuple, python: Optional[str], error_text=str) -> list:
    """A session's dependencies (jm/cluster/sql/sessiondeps.py): its UDFs' interpreter, and
    its files as its Spark Connect session's artifacts (`kind`: addArtifacts' keyword, ""
    for a jar; an archive's `#name` is the folder it is unpacked as). The errors."""
    errors = []
    if python:
        errors += set_properties(spark, {UDF_PYTHON: python}, error_text)
    for kind, path in artifacts:
        try:
            spark.addArtifacts(path, **({kind: True} if kind else {}))
        except Exception as exc:
            errors.append(f"artifact {os.path.basename(path)}: {error_text(exc)[:500]}")
    return errors


def apply(spark: Any, config: dict) -> dict:
    """Set a statement's executionConfig: {key: (its value, the value before or _UNSET)}."""
    applied = {}
    for key, value in (config or {}).items():
        key, value = str(key), str(value)
        before = spark.conf.get(key, None)
        spark.conf.set(key, value)
        applied[key] = (value, _UNSET if before is None else before)
    return applied


def restore(spark: Any, applied: dict) -> None:
    """Undo `apply` for the keys the statement left as they were set."""
    for key, (value, before) in applied.items():
        try:
            if spark.conf.get(key, None) != value:
                continue  # the statement changed it: its own change stays
            if before is _UNSET:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, before)
        except Exception:
            pass
