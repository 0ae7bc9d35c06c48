"""jm/policy/jobs/usertrace.py: the user's frames of a traceback, one line for an error (pure)."""
from __future__ import annotations

import traceback

from jm.policy.jobs import usertrace as U
from jm.policy.jobs.usertrace import error_line, frame_lines, user_frames, user_traceback

HIDDEN = ("/opt/jm/", __file__)  # (this file: the frame that catches)
COLLAPSED = ("/site/pyspark/", "/site/py4j/")


def _module(filename: str, source: str, env: dict) -> None:
    exec(compile(source, filename, "exec"), env)


def _raise_through_layers(error: str = "raise ValueError('bad input')"):
    """A real traceback: runner (ours) -> app (user) -> pyspark -> pyspark -> py4j ->
    the user's callback -> the error."""
    env: dict = {}
    _module("/home/u/callback.py", f"def callback():\n    {error}\n", env)
    _module("/site/py4j/java_gateway.py", "def call(f):\n    return f()\n", env)
    _module("/site/pyspark/inner.py", "def inner(f):\n    return call(f)\n", env)
    _module("/site/pyspark/sql.py", "def sql(f):\n    return inner(f)\n", env)
    _module("/home/u/app.py", "def main():\n    return sql(callback)\n", env)
    _module("/opt/jm/runtime/jobrun.py", "def run_job():\n    return main()\n", env)
    try:
        env["run_job"]()
    except BaseException as exc:
        return exc
    raise AssertionError("did not raise")


def _files(te: traceback.TracebackException) -> list[str]:
    return [f"{f.filename}:{f.name}" for f in te.stack]


def test_only_the_users_frames_and_the_first_of_each_run_of_spark_frames_stay():
    exc = _raise_through_layers()
    te = user_traceback(traceback.TracebackException.from_exception(exc), HIDDEN, COLLAPSED)
    assert _files(te) == ["/home/u/app.py:main", "/site/pyspark/sql.py:sql",
                          "/home/u/callback.py:callback"]
    text = "".join(te.format())
    assert "/opt/jm/" not in text and "inner" not in text and "py4j" not in text
    assert text.rstrip().endswith("ValueError: bad input")
    # what it was made from is not changed
    full = traceback.TracebackException.from_exception(exc)
    assert any(f.filename.startswith("/opt/jm/") for f in full.stack)


def test_chained_exceptions_are_filtered_too():
    exc = _raise_through_layers("raise KeyError('k')")
    try:
        raise RuntimeError("wrapped") from exc
    except RuntimeError as outer:
        te = user_traceback(traceback.TracebackException.from_exception(outer), HIDDEN,
                            COLLAPSED)
    assert te.__cause__ is not None
    assert "/opt/jm/" not in "".join(te.format())
    assert _files(te.__cause__)[0] == "/home/u/app.py:main"


def test_spark_frames_the_runner_called_are_not_the_users():
    frames = [traceback.FrameSummary("/opt/jm/runtime/jobrun.py", 1, "run_sql"),
              traceback.FrameSummary("/site/pyspark/sql/session.py", 2, "sql"),
              traceback.FrameSummary("/site/pyspark/errors/utils.py", 3, "deco")]
    assert user_frames(frames, HIDDEN, COLLAPSED) == []


def test_importlib_frames_are_hidden():
    frames = [traceback.FrameSummary("<frozen importlib._bootstrap>", 1, "_gcd_import"),
              traceback.FrameSummary("/home/u/mod.py", 2, "<module>"),
              traceback.FrameSummary("<frozen importlib._bootstrap_external>", 3, "exec")]
    assert [f.filename for f in user_frames(frames, HIDDEN, COLLAPSED)] == ["/home/u/mod.py"]


def test_a_syntax_error_without_frames_keeps_its_place():
    try:
        compile("x = (\n", "/home/u/app.py", "exec")
    except SyntaxError as exc:
        te = user_traceback(traceback.TracebackException.from_exception(exc), HIDDEN, ())
    text = "".join(te.format())
    assert "Traceback" not in text and 'File "/home/u/app.py", line 1' in text
    assert frame_lines(text)[0] == '  File "/home/u/app.py", line 1'


TRACE = """Traceback (most recent call last):
  File "/home/u/helper.py", line 3, in fail
    {}["x"]
KeyError: 'x'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/home/u/app.py", line 4, in <module>
    go()
  File "/home/u/helper.py", line 5, in fail
    raise ValueError("bad value") from e
ValueError: bad value
second line of the message
"""


def test_frame_lines_are_the_last_exceptions_frames_without_its_message():
    assert frame_lines(TRACE) == ['  File "/home/u/app.py", line 4, in <module>', "    go()",
                                  '  File "/home/u/helper.py", line 5, in fail',
                                  '    raise ValueError("bad value") from e']
    assert frame_lines("ParseException: [X] bad\n\nJVM stacktrace:\n\tat a.b") == []
    assert frame_lines("") == []


CONNECT = """[PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'. SQLSTATE: 42601 (line 1, pos 0)

== SQL ==
SELEC 1
^^^

JVM stacktrace:
org.apache.spark.sql.catalyst.parser.ParseException:
\tat org.apache.spark.sql.catalyst.parser.ParseException.withCommand(parsers.scala:274)
"""


def test_error_line_is_the_type_the_error_class_and_the_first_line():
    assert error_line("ParseException", CONNECT, "PARSE_SYNTAX_ERROR") == (
        "ParseException: [PARSE_SYNTAX_ERROR] Syntax error at or near 'SELEC'. "
        "SQLSTATE: 42601 (line 1, pos 0)")
    assert error_line("AnalysisException", "Table not found\nmore", "TABLE_OR_VIEW_NOT_FOUND") \
        == "AnalysisException: [TABLE_OR_VIEW_NOT_FOUND] Table not found"
    assert error_line("Py4JJavaError", "\nAn error occurred while calling o1.sql.\n: java...") \
        == "Py4JJavaError: An error occurred while calling o1.sql."
    assert error_line("X", "\n\nJVM stacktrace:\nat y") == "X"
    assert len(error_line("X", "m" * 5000)) == 1000


def test_files_are_shown_by_the_names_the_user_gave():
    names = (("/d/blobs/ab12/app.py", "app.py"), ("/d/blobs/cd34/lib", "lib"),
             ("/tmp/cache/x.py", "s3://bucket/x.py"))
    assert U.shown_name("/d/blobs/ab12/app.py", names) == "app.py"
    assert U.shown_name("/d/blobs/cd34/lib/util/io.py", names) == "lib/util/io.py"
    assert U.shown_name("/d/blobs/cd34/library.py", names) == "/d/blobs/cd34/library.py"
    assert U.shown_name("/tmp/cache/x.py", names) == "s3://bucket/x.py"
    assert U.shown_name("/usr/lib/python3/json.py", names) == "/usr/lib/python3/json.py"


def test_a_traceback_and_a_syntax_error_name_the_users_files(tmp_path):
    import traceback
    path = str(tmp_path / "blobs" / "ab12" / "broken.py")
    try:
        compile("print('total', 1\n", path, "exec")
    except SyntaxError as exc:
        te = traceback.TracebackException.from_exception(exc)
    text = "".join(U.user_traceback(te, (), (), names=((path, "broken.py"),)).format())
    assert 'File "broken.py", line 1' in text and "blobs" not in text, text
    code = compile("def go():\n    raise ValueError('x')\ngo()\n", path, "exec")
    try:
        exec(code, {})
    except ValueError as exc:
        te = traceback.TracebackException.from_exception(exc)
    text = "".join(U.user_traceback(te, (), (), names=((path, "broken.py"),)).format())
    assert 'File "broken.py", line 2, in go' in text and "blobs" not in text, text
