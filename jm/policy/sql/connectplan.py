"""A temporary view made from a DataFrame, as a session's state-defining statement (pure:
the standard library and
jm/policy/sql/flinksql.py's quoting).

A Livy `pyspark` session's `df.createOrReplaceTempView("v")` runs a Spark Connect command
(`create_dataframe_view`, with the DataFrame's plan), not SQL. To replay it on another
peer after a failover, the command's bytes are recorded in a statement that is also valid
Spark SQL defining a temporary view of that name, so whatever reads a session's recorded
statements to learn its temporary views (jm.policy.sql.sqlparse.temp_views) sees it:

    /* jm:connect-command <base64 of the command> */ CREATE OR REPLACE TEMPORARY VIEW `v` AS SELECT 1

The SQL worker's replay (jm/runtime/sqlworker.py) runs the command it carries instead.
"""
from __future__ import annotations

import base64
import binascii
import re
from typing import Optional

from jm.policy.sql.flinksql import backquote

MARKER = "/* jm:connect-command "
MAX_COMMAND = 256 * 1024   # bytes: a bigger view's plan is not recorded

_MARKED = re.compile(r"/\* jm:connect-command ([A-Za-z0-9+/=]*) \*/ CREATE OR REPLACE "
                     r"TEMPORARY VIEW `((?:[^`]|``)+)` AS SELECT 1", re.S)


def encode_view(name: str, command: bytes) -> str:
    """The statement recording the Connect command `command` that defines the temporary
    view `name`."""
    if not name:
        raise ValueError("a view needs a name")
    data = base64.b64encode(bytes(command)).decode("ascii")
    return (f"{MARKER}{data} */ CREATE OR REPLACE TEMPORARY VIEW {backquote(name)} "
            f"AS SELECT 1")


def decode(statement: str) -> Optional[bytes]:
    """The command bytes of a statement made by encode_view; None for any other statement
    (one that does not start with MARKER); ValueError for a damaged one."""
    if not isinstance(statement, str) or not statement.lstrip().startswith(MARKER):
        return None
    m = _MARKED.fullmatch(statement.strip())
    if m is None:
        raise ValueError("malformed connect-command statement")
    try:
        return base64.b64decode(m.group(1), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"malformed connect-command statement: {exc}") from None


def view_name(statement: str) -> Optional[str]:
    """The view a statement made by encode_view defines (None for another statement)."""
    if decode(statement) is None:
        return None
    return _MARKED.fullmatch(statement.strip()).group(2).replace("``", "`")


def too_big_note(name: str, size: int) -> str:
    return (f"note: temporary view {name} is not kept if this session moves to another "
            f"peer (its plan is {size} bytes, more than {MAX_COMMAND // 1024} KB)")
