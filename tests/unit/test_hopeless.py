"""jm/policy/jobs/hopeless.py: which failures no restart can pass (pure)."""
from __future__ import annotations

import pytest

from jm.policy.jobs.hopeless import LOAD, RUN, FailureFacts, hopeless


def kinds(exc_type: type) -> tuple[str, ...]:
    return tuple(k.__name__ for k in exc_type.__mro__)


@pytest.mark.parametrize("exc_type", [SyntaxError, IndentationError, TabError])
def test_code_that_does_not_compile_is_hopeless_while_loading_and_before_spark(exc_type):
    assert hopeless(FailureFacts(LOAD, kinds(exc_type), False)) == \
        "the job's code does not compile"
    assert hopeless(FailureFacts(LOAD, kinds(exc_type), True)) == \
        "the job's code does not compile"
    assert hopeless(FailureFacts(RUN, kinds(exc_type), False)) == \
        "the job's code does not compile, before its Spark application started"
    assert hopeless(FailureFacts(RUN, kinds(exc_type), True)) is None


@pytest.mark.parametrize("exc_type", [ImportError, ModuleNotFoundError])
def test_a_failed_import_is_hopeless_while_loading_and_before_spark(exc_type):
    assert hopeless(FailureFacts(LOAD, kinds(exc_type), False)) == \
        "an import in the job's code failed"
    # a script's own top-level import of a missing module
    assert "import" in hopeless(FailureFacts(RUN, kinds(exc_type), False))
    # once Spark ran, the restart strategy decides
    assert hopeless(FailureFacts(RUN, kinds(exc_type), True)) is None


def test_a_missing_script_or_entry_function_is_hopeless():
    class EntryNotFound(AttributeError):
        pass

    class ScriptNotFound(FileNotFoundError):
        pass
    assert hopeless(FailureFacts(LOAD, kinds(ScriptNotFound), False)) == \
        "the script is missing"
    # a file the entry module reads as it is imported is not the job's code
    assert hopeless(FailureFacts(LOAD, kinds(FileNotFoundError), False)) is None
    assert hopeless(FailureFacts(LOAD, kinds(EntryNotFound), False)) == \
        "the entry function is missing"
    # a file the job's code reads is not its code
    assert hopeless(FailureFacts(RUN, kinds(FileNotFoundError), False)) is None
    assert hopeless(FailureFacts(RUN, kinds(AttributeError), False)) is None


@pytest.mark.parametrize("code,why", [
    (2, "it exited (code 2) before its Spark application started"),
    ("usage: app.py FILE", "it exited with a message before its Spark application "
                           "started")])
def test_an_exit_before_spark_started_is_hopeless(code, why):
    assert hopeless(FailureFacts(RUN, kinds(SystemExit), False, code)) == why
    assert hopeless(FailureFacts(RUN, kinds(SystemExit), True, code)) is None


@pytest.mark.parametrize("exc_type", [RuntimeError, ValueError, OSError, ConnectionError,
                                      KeyboardInterrupt, MemoryError])
def test_other_failures_are_left_to_the_restart_strategy(exc_type):
    for phase in (LOAD, RUN):
        for started in (False, True):
            assert hopeless(FailureFacts(phase, kinds(exc_type), started)) is None
