"""Failures no restart can pass, told apart purely (the job process gives the facts, the
restart decision reads the answer): the job fails at once, whatever its restart strategy.

* loading the user's code: the script or the entry module does not compile
  (SyntaxError, IndentationError), an import fails (ImportError, ModuleNotFoundError),
  the script or the entry function is missing;
* running it before its Spark application or session started (classic: no
  SparkContext; connect: no session): a SyntaxError or ImportError (a script's own
  top-level import of a missing module), or a non-zero exit (argparse's usage error,
  `sys.exit("usage: ...")`): nothing outside the code was touched, the next run does
  the same. After Spark started, the restart strategy decides (the input or the cluster
  may have been the cause).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

LOAD = "load"   # reading and compiling the script, importing the entry module
RUN = "run"     # the script's code or the entry function runs


@dataclass(frozen=True)
class FailureFacts:
    phase: str                  # LOAD or RUN
    kinds: tuple[str, ...]      # the exception's class and its bases, by name
    spark_started: bool         # the job's Spark application / session exists
    exit_code: Optional[object] = None  # a SystemExit's code


def hopeless(f: FailureFacts) -> Optional[str]:
    """Why the failure cannot pass on a restart, or None (the strategy decides)."""
    kinds = set(f.kinds)
    if "KeyboardInterrupt" in kinds:  # stopped by us (cancel, stop, move)
        return None
    if "SystemExit" in kinds:
        if f.exit_code in (None, 0) or f.spark_started:
            return None
        how = (f"(code {f.exit_code})" if isinstance(f.exit_code, int)
               else "with a message")  # (the message is the failure's text)
        return f"it exited {how} before its Spark application started"
    if f.phase == LOAD:
        if "EntryNotFound" in kinds:
            return "the entry function is missing"
        if "ScriptNotFound" in kinds:
            return "the script is missing"
    code_error = _code_error(kinds)
    if code_error is None:
        return None
    if f.phase == LOAD:
        return code_error
    if not f.spark_started:
        return f"{code_error}, before its Spark application started"
    return None


def _code_error(kinds: set) -> Optional[str]:
    if "SyntaxError" in kinds:  # IndentationError and TabError too
        return "the job's code does not compile"
    if "ImportError" in kinds:  # ModuleNotFoundError too
        return "an import in the job's code failed"
    return None
