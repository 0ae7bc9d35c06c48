"""Running one statement of a Livy `pyspark` session's Python code, as Livy's own REPL
(fake_shell.py) does (no Spark here: jm/runtime/livyrepl.py is the process around it).

* The code is parsed with `ast` (file name `<stdin>`); every node but the last runs with
  exec; a last expression is evaluated and, if not None, its repr is printed, as in
  Python's interactive mode. What the code writes to stdout and stderr is the text.
* A last line `%json <expr>` gives the value as JSON; `%table <expr>` as Livy's table
  (`{"headers": [{"name", "type"}], "data": [[...]]}`) of a list of dicts, rows or
  values, or of a Spark DataFrame (its first TABLE_ROWS rows); any other `%x` line is
  an error (UnknownMagic).
* An exception is an error result: its type's name, its message, and the traceback of the
  user's code only (the frames of this module are dropped).
"""
from __future__ import annotations

import ast
import datetime
import decimal
import io
import json
import sys
import traceback
from typing import Any, Callable, Optional

from jm.runtime.livyproto import CodeResult

FILENAME = "<stdin>"
TABLE_ROWS = 1000

# Spark's type names (DataType.typeName()) as Livy's table types
SPARK_TYPES = {"integer": "INT_TYPE", "short": "INT_TYPE", "byte": "INT_TYPE",
               "long": "BIGINT_TYPE", "float": "DOUBLE_TYPE", "double": "DOUBLE_TYPE",
               "string": "STRING_TYPE", "boolean": "BOOLEAN_TYPE", "decimal": "DECIMAL_TYPE",
               "date": "DATE_TYPE", "timestamp": "TIMESTAMP_TYPE",
               "timestamp_ntz": "TIMESTAMP_TYPE", "array": "ARRAY_TYPE", "map": "MAP_TYPE",
               "struct": "MAP_TYPE", "void": "NULL_TYPE", "null": "NULL_TYPE",
               "binary": "BINARY_TYPE"}


class UnknownMagic(Exception):
    pass


class NoSparkContext:
    """`sc` in the namespace: a Spark Connect session has no SparkContext."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError("SparkContext is not available: this session runs on Spark "
                           "Connect; use spark")

    def __repr__(self) -> str:
        return "<SparkContext: not available on Spark Connect; use spark>"


def split_magic(code: str) -> tuple[str, Optional[str]]:
    """(the code before a last-line magic, the magic line or None)."""
    lines = code.rstrip().split("\n")
    if lines and lines[-1].startswith("%"):
        return "\n".join(lines[:-1]), lines[-1].rstrip()
    return code, None


def run_code(code: str, ns: dict) -> Any:
    """Run `code` in `ns`; the value of its last statement if that is an expression."""
    tree = ast.parse(code, FILENAME, "exec")
    if not tree.body:
        return None
    last = tree.body[-1]
    body = tree.body[:-1] if isinstance(last, ast.Expr) else tree.body
    if body:
        exec(compile(ast.Module(body=body, type_ignores=[]), FILENAME, "exec"), ns)
    if isinstance(last, ast.Expr):
        return eval(compile(ast.Expression(body=last.value), FILENAME, "eval"), ns)
    return None


def evaluate(expr: str, ns: dict) -> Any:
    return eval(compile(expr.strip(), FILENAME, "eval"), ns)


def user_traceback(exc: BaseException) -> tuple:
    """The formatted traceback from the first frame of the user's code on."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != FILENAME:
        tb = tb.tb_next
    if tb is None:
        return tuple(traceback.format_exception_only(type(exc), exc))
    return tuple(traceback.format_exception(type(exc), exc, tb))


def to_json(value: Any) -> Any:
    """The value as JSON (ValueError, TypeError if it is not serialisable)."""
    return json.loads(json.dumps(value, allow_nan=False))


def _is_dataframe(value: Any) -> bool:
    return all(hasattr(value, a) for a in ("schema", "limit", "collect", "createTempView"))


def cell(value: Any) -> tuple[str, Any]:
    """(Livy's table type, a JSON value) of one value."""
    if value is None:
        return "NULL_TYPE", None
    if isinstance(value, bool):
        return "BOOLEAN_TYPE", value
    if isinstance(value, int):
        return "INT_TYPE", value if -2**63 <= value < 2**63 else str(value)
    if isinstance(value, float):
        return "DOUBLE_TYPE", value
    if isinstance(value, datetime.datetime):
        return "TIMESTAMP_TYPE", str(value)
    if isinstance(value, datetime.date):
        return "DATE_TYPE", str(value)
    if isinstance(value, decimal.Decimal):
        return "DECIMAL_TYPE", str(value)
    if hasattr(value, "asDict") and isinstance(value, tuple):  # a Row (a struct)
        value = value.asDict()
    if isinstance(value, dict):
        return "MAP_TYPE", {str(k): cell(v)[1] for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return "ARRAY_TYPE", [cell(v)[1] for v in value]
    if isinstance(value, (bytes, bytearray)):
        return "BINARY_TYPE", bytes(value).decode("latin-1")
    return "STRING_TYPE", str(value)


def dataframe_table(df: Any, limit: int = TABLE_ROWS) -> dict:
    headers = [{"name": f.name, "type": SPARK_TYPES.get(f.dataType.typeName(), "STRING_TYPE")}
               for f in df.schema.fields]
    data = [[cell(v)[1] for v in row] for row in df.limit(limit).collect()]
    return {"headers": headers, "data": data}


def _sort_key(key: Any) -> tuple:
    return (isinstance(key, str), key if isinstance(key, (int, str)) else str(key))


def to_table(value: Any) -> dict:
    """Livy's table of a DataFrame, or of rows (dicts, Rows, lists, tuples or values)."""
    if _is_dataframe(value):
        return dataframe_table(value)
    if isinstance(value, dict) or (hasattr(value, "asDict") and isinstance(value, tuple)):
        value = [value]
    headers: dict = {}
    data = []
    for row in value:
        if hasattr(row, "asDict") and isinstance(row, tuple):
            row = row.asDict()
        if not isinstance(row, (list, tuple, dict)):
            row = [row]
        items = (sorted(row.items(), key=lambda kv: _sort_key(kv[0])) if isinstance(row, dict)
                 else enumerate(row))
        cols = []
        for key, col in items:
            kind, col = cell(col)
            header = headers.setdefault(key, {"name": str(key), "type": kind})
            if header["type"] != kind and kind != "NULL_TYPE":
                if header["type"] != "NULL_TYPE":
                    raise ValueError("table rows have different types")
                header["type"] = kind
            cols.append(col)
        data.append(cols)
    return {"headers": [h for _, h in sorted(headers.items(), key=lambda kv: _sort_key(kv[0]))],
            "data": data}


def run_magic(magic: str, ns: dict) -> dict:
    """The CodeResult fields a magic line gives."""
    name, _, rest = magic[1:].partition(" ")
    if name == "json":
        return {"json": to_json(evaluate(rest, ns))}
    if name == "table":
        return {"table": to_table(evaluate(rest, ns))}
    raise UnknownMagic(f"unknown magic command %{name}")


class Capture(io.TextIOBase):
    """sys.stdout and sys.stderr for good: a statement's buffer while one runs, else the
    stream it was made with (a handler that took sys.stderr while a statement ran, like
    pyspark's loggers do, keeps writing where the statement that runs then writes)."""

    def __init__(self, log: Any) -> None:
        self.log = log
        self.current: Optional[io.StringIO] = None

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        out = self.current
        return (out if out is not None else self.log).write(text)

    def flush(self) -> None:
        if self.current is None:
            self.log.flush()

    def isatty(self) -> bool:
        return False


def capture() -> Capture:
    """The process's Capture, installed as sys.stdout and sys.stderr at the first call."""
    if not isinstance(sys.stdout, Capture):
        sys.stdout = sys.stderr = Capture(sys.__stderr__)
    return sys.stdout


MAX_TEXT = 512 * 1024  # characters of a statement's printed output kept


class BoundedText(io.StringIO):
    """A statement's printed output: the first `limit` characters kept, the rest counted
    (a statement that prints hundreds of megabytes costs its process no more memory)."""

    def __init__(self, limit: int = MAX_TEXT) -> None:
        super().__init__()
        self.limit, self.dropped = limit, 0

    def write(self, text: str) -> int:
        room = max(0, self.limit - self.tell())
        if room < len(text):
            self.dropped += len(text) - room
            super().write(text[:room])
        else:
            super().write(text)
        return len(text)  # (all of it taken, as a stream does)


def _text(out: io.StringIO) -> str:
    text = out.getvalue()
    text = text[:-1] if text.endswith("\n") else text
    dropped = getattr(out, "dropped", 0)
    return text + (f"\n[output cut: {dropped} more characters not kept]" if dropped else "")


def execute(code: str, ns: dict,
            guard: Callable[[Callable[[], Any]], Any] = lambda fn: fn()) -> CodeResult:
    """Run one statement's code in `ns`; `guard(fn)` runs the user's part (fn), so that a
    caller can make it interruptible only while it runs."""
    code, magic = split_magic(code)
    cap = capture()
    out = cap.current = BoundedText()

    def body() -> dict:
        value = run_code(code, ns) if code.strip() else None
        if value is not None:
            print(repr(value))
        return run_magic(magic, ns) if magic is not None else {}
    try:
        extra = guard(body)
    except BaseException as exc:  # the user's error (SystemExit too): the result's
        cap.current = None
        return CodeResult("error", _text(out), ename=type(exc).__name__, evalue=str(exc),
                          traceback=user_traceback(exc))
    finally:
        cap.current = None
    return CodeResult("ok", _text(out), **extra)
