"""The user's code in a job process: loading it (a script read and compiled before any
Spark starts, an entry module imported), running a script as `__main__`, and what its
failure leaves in error.json: one line for it (Spark's error class and message), the
traceback of the user's frames only (jm/policy/jobs/usertrace.py), and whether a restart
could pass it (jm/policy/jobs/hopeless.py)."""
from __future__ import annotations

import builtins
import importlib
import os
import sys
import traceback
import types
import zipfile
from dataclasses import dataclass
from importlib.util import find_spec
from types import CodeType
from typing import Any, Optional, Sequence

from jm.policy.jobs.hopeless import FailureFacts, hopeless
from jm.policy.jobs.usertrace import error_line, user_traceback


class EntryNotFound(AttributeError):
    """The entry module has no such callable (jm/policy/jobs/hopeless.py reads the name)."""


class ScriptNotFound(FileNotFoundError):
    """The script is not there, or its zip has no __main__.py (read by name, as above)."""


def _folder(path: Optional[str]) -> str:
    return os.path.dirname(os.path.abspath(path)) + os.sep if path else ""


def _package_dir(name: str) -> str:
    """The folder of an installed package, without importing it ("" if absent)."""
    try:
        spec = find_spec(name)
    except (ImportError, ValueError):
        return ""
    return _folder(spec.origin) if spec is not None and spec.origin else ""


# the runner's frames (this package, importlib's, runpy's) are not the user's; of
# pyspark's and py4j's, a user sees the call their code made (jm/policy/jobs/usertrace.py)
HIDDEN = (os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
          _folder(importlib.__file__), os.path.join(_folder(os.__file__), "runpy.py"))
COLLAPSED = tuple(p for p in (_package_dir("pyspark"), _package_dir("py4j")) if p)


@dataclass(frozen=True)
class Script:
    """A script read and compiled, not run yet."""
    path: str          # as given (its base name is sys.argv[0])
    filename: str      # its __file__ (a zip's __main__.py inside the zip)
    code: CodeType


def add_pyfiles(pyfiles: list[str]) -> None:
    for p in reversed(pyfiles):
        path = os.path.dirname(p) if p.endswith(".py") else p.rstrip("/") or p
        if path not in sys.path:
            sys.path.insert(0, path)


def load_entry(entry: str, pyfiles: list[str]):
    add_pyfiles(pyfiles)
    module_name, func_name = entry.split(":", 1)
    module = importlib.import_module(module_name)
    func = getattr(module, func_name, None)
    if not callable(func):
        raise EntryNotFound(f"{module_name} has no callable {func_name!r}")
    return func


def compile_script(path: str) -> Script:
    """A .py file, or a .zip's __main__.py, read and compiled (a missing file or a
    SyntaxError raises here, before any Spark driver or session is started)."""
    try:
        if path.endswith(".zip"):
            with zipfile.ZipFile(path) as z:
                source = z.read("__main__.py")
            filename = os.path.join(path, "__main__.py")
        else:
            with open(path, "rb") as f:
                source = f.read()
            filename = path
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, KeyError,
            zipfile.BadZipFile) as exc:
        raise ScriptNotFound(f"the script {path} cannot be run: {exc}") from None
    return Script(path, filename, compile(source, filename, "exec", dont_inherit=True))


def run_script(script: Script, argv: list[str], pyfiles: list[str]) -> None:
    """Run a compiled script as __main__, as `python app.py ARGS` and spark-submit do:
    sys.argv is [the script's file name, *argv]; the script's folder (or the zip) is
    first on sys.path, then the pyfiles; `__file__` is its full path."""
    add_pyfiles(pyfiles)
    path = script.path
    sys.path.insert(0, path if path.endswith(".zip") else os.path.dirname(path))
    main = types.ModuleType("__main__")
    main.__file__ = script.filename
    main.__builtins__ = builtins  # type: ignore[attr-defined]
    sys.modules["__main__"] = main  # functions defined in it pickle by value (UDFs)
    sys.argv = [os.path.basename(path), *argv]
    exec(script.code, main.__dict__)


def spark_started(classic: bool, own_session: Any) -> bool:
    """Whether the job's Spark application (classic: its SparkContext) or session
    (connect) exists: before that, the job touched nothing outside its code."""
    if own_session is not None:
        return True
    if classic:
        context = sys.modules.get("pyspark.context")
        return context is not None and context.SparkContext._active_spark_context is not None
    session = sys.modules.get("pyspark.sql.connect.session")
    try:
        return session is not None and session.SparkSession._get_default_session() is not None
    except Exception:
        return True  # unknown: the restart strategy decides


def exception_line(exc: BaseException) -> str:
    """One line for a Spark error (its class, error class and message, no JVM stack);
    `Type: message` as Python shows it for any other."""
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    if not module.startswith(("pyspark", "py4j")):
        return f"{name}: {exc}"
    message, error_class = str(exc), None
    try:
        if hasattr(exc, "getMessage"):
            message = exc.getMessage() or message
        getter = getattr(exc, "getCondition", None) or getattr(exc, "getErrorClass", None)
        error_class = getter() if getter is not None else None
    except Exception:
        pass
    return error_line(name, message, error_class if isinstance(error_class, str) else None)


def user_trace(exc: BaseException, names: Sequence[tuple[str, str]] = ()) -> str:
    """The traceback of `exc` (and what it chains) with the user's frames only, their
    files named as the user gave them (`names`: RunParams.shown_names)."""
    te = traceback.TracebackException.from_exception(exc)
    return "".join(user_traceback(te, HIDDEN, COLLAPSED, names=names).format())


def failure_record(exc: BaseException, phase: str, started: bool,
                   names: Sequence[tuple[str, str]] = ()) -> dict:
    """error.json's content for `exc`: its line, the user's traceback, and `hopeless`
    (why no restart can pass it) when so."""
    if isinstance(exc, SystemExit):
        line, code = f"SystemExit: {exc.code}", exc.code
    else:
        line, code = exception_line(exc), None
    kinds = tuple(k.__name__ for k in type(exc).__mro__)
    out = {"exception": line, "traceback": user_trace(exc, names)}
    why = hopeless(FailureFacts(phase, kinds, started, code))
    if why:
        out["hopeless"] = why
    return out
