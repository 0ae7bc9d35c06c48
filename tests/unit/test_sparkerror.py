"""jm/policy/sql/sparkerror.py: a Spark error as one line for users, the whole text kept.

The texts are what the SQL worker (jm/runtime/sqlworker.py `error_text`) made of the
exceptions of a real Spark Connect session (pyspark 4.x), captured once."""
import json
import os

import pytest

from jm.policy.sql.sparkerror import MAX_SHORT, errors, short

# what jm/runtime/sqlworker.py `error_text` made of a real Spark Connect session's errors
# (pyspark 4.x, captured once; the JVM stacks cut after two frames)
with open(os.path.join(os.path.dirname(__file__), "spark_errors.json")) as _f:
    REAL = json.load(_f)
NESTED = ("AnalysisException: [INCOMPATIBLE_DATA_FOR_TABLE.CANNOT_FIND_DATA] Cannot write "
          "incompatible data for the table `t`: Cannot find data for the output column `b`. "
          "SQLSTATE: KD000")
PYTHON = ("PythonException: \n  An exception was thrown from the Python worker. Please see "
          "the stack trace below.\nTraceback (most recent call last):\n  File \"<stdin>\", "
          "line 3, in f\nValueError: boom from a UDF\n")


@pytest.mark.parametrize("statement, line", [
    ("SELEC 1", "[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'. SQLSTATE: 42601 "
                "(line 1, pos 0)"),
    ("SELECT * FROM no_such_table",
     "[TABLE_OR_VIEW_NOT_FOUND] The table or view `no_such_table` cannot be found. Verify the "
     "spelling and correctness of the schema and catalog. Search path: [`system`.`builtin`, "
     "`system`.`session`, `spark_catalog`.`default`]. If you did not qualify the name with a "
     "schema, verify the current_schema() output, or qualify the name with the correct "
     "schema and catalog. To tolerate the error on drop use DROP VIEW IF EXISTS or DROP "
     "TABLE IF EXISTS. SQLSTATE: 42P01; line 1 pos 14"),
    ("SELECT no_col FROM range(1)",
     "[UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with "
     "name `no_col` cannot be resolved. Did you mean one of the following? [`id`]. "
     "SQLSTATE: 42703; line 1 pos 7"),
    ("SELECT CAST('x' AS INT)",
     "[CAST_INVALID_INPUT] The value 'x' of the type \"STRING\" cannot be cast to \"INT\" "
     "because it is malformed. Correct the value as per the syntax, or change its target "
     "type. Use `try_cast` to tolerate malformed input and return NULL instead. "
     "SQLSTATE: 22018"),
    ("SELECT 1/0", "[DIVIDE_BY_ZERO] Division by zero. Use `try_divide` to tolerate divisor "
                   "being 0 and return NULL instead. If necessary set "
                   "\"spark.sql.ansi.enabled\" to \"false\" to bypass this error. "
                   "SQLSTATE: 22012"),
    ("SELECT raise_error('custom boom')", "[USER_RAISED_EXCEPTION] custom boom SQLSTATE: P0001"),
])
def test_real_spark_errors_are_their_error_class_and_message(statement, line):
    text = REAL[statement]
    assert "JVM stacktrace:" in text  # (what `jm sql` printed before)
    assert short(text) == line
    assert short(line) == line  # idempotent: a client may shorten a short line again


@pytest.mark.parametrize("text, line", [
    (NESTED, NESTED.split(": ", 1)[1]),
    (PYTHON, "PythonException: ValueError: boom from a UDF"),
    ("LookupError: session s1 is not open in this worker",
     "LookupError: session s1 is not open in this worker"),
    ("the statement ran but the session could not keep it: stale\nmore",
     "the statement ran but the session could not keep it: stale"),
])
def test_other_shapes(text, line):
    assert short(text) == line
    assert short(line) == line  # idempotent: a client may shorten a short line again


def test_the_answer_lists_the_line_then_the_whole_text():
    whole = REAL["SELEC 1"]
    assert errors(whole) == [short(whole), whole.strip()]
    assert errors("LookupError: gone") == ["LookupError: gone"]  # nothing more to say
    assert errors("") == [""]


def test_a_long_message_is_cut():
    line = short("[X_Y] " + "word " * 1000 + "SQLSTATE: 42000")
    assert len(line) == MAX_SHORT and line.endswith("...")


def test_brackets_inside_a_message_are_not_an_error_class():
    assert short("ValueError: expected [A] or [B]\nmore") == "ValueError: expected [A] or [B]"
