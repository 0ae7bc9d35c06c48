"""Flink SQL's session statements in Spark SQL's syntax (pure: no I/O, standard library).

Flink's SQL Client and its users quote a configuration key and value as string literals
(`SET 'table.exec.mini-batch.enabled' = 'true'`, `RESET 'key'`); Spark's parser refuses
that. The SQL gateway (jm/cluster/sql/sqlgateway.py) translates such a statement before it
runs and before it is recorded for the session's next peer, so the replay there runs
Spark's syntax:

* `SET 'k' = 'v'`  ->  `SET k=v`, or SET `k`=`v` (backquoted) when the key or value holds
  characters Spark's unquoted form refuses (a hyphen, a space, a `;`, quotes);
* `RESET 'k'`      ->  `RESET k` (or RESET `k`);
* `SET;`, `RESET;` ->  `SET`, `RESET` (Spark's SET lists the properties).

Flink's gateway answers a SET of a key or a RESET with one `result` column and one row
`OK` (`answers_ok`); a listing keeps Spark's `key`, `value` columns, as Flink's does.
Any other statement is left as it is (None).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from jm.policy.sql.sqlstmt import strip_comments

OK_SCHEMA = {"type": "struct", "fields": [
    {"name": "result", "type": "string", "nullable": True, "metadata": {}}]}
OK_ROWS = [["OK"]]

_LITERAL = r"'((?:[^']|'')*)'"   # a Flink string literal ('' is a quote)
_SET = re.compile(r"SET\s+" + _LITERAL + r"\s*=\s*" + _LITERAL, re.I | re.S)
_RESET = re.compile(r"RESET\s+" + _LITERAL, re.I | re.S)
_BARE = re.compile(r"(SET|RESET)", re.I)
_PLAIN_RESET = re.compile(r"RESET\s+[A-Za-z0-9_.:]+", re.I)
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_.:]+")           # Spark's unquoted key
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9_.:/+\-,@]+")   # a value safe unquoted


@dataclass(frozen=True)
class Translation:
    statement: str        # in Spark's syntax
    answers_ok: bool      # Flink answers it with one `result` column, one row OK


def _unquote(literal: str) -> str:
    return literal.replace("''", "'")


def backquote(text: str) -> str:
    return "`" + text.replace("`", "``") + "`"


def _key(key: str) -> str:
    return key if _PLAIN_KEY.fullmatch(key) else backquote(key)


def spark_reset(key: str) -> str:
    """Spark's statement resetting `key` (any characters)."""
    return f"RESET {_key(key)}"


def spark_set(key: str, value: str) -> str:
    """Spark's statement setting `key` to `value` (any characters in either)."""
    plain = value == "" or (_PLAIN_VALUE.fullmatch(value) and "--" not in value)
    if _PLAIN_KEY.fullmatch(key) and plain:  # (`--` would start a comment)
        return f"SET {key}={value}"
    if value == "":  # (an empty backquoted name is no name)
        return f"SET {backquote(key)}="
    return f"SET {backquote(key)}={backquote(value)}"


def translate(statement: str) -> Optional[Translation]:
    """The statement in Spark's syntax if it is one of Flink's session statements that
    Spark reads otherwise (or answers otherwise); None for any other statement."""
    if not isinstance(statement, str):
        return None
    text = strip_comments(statement).strip().rstrip(";").strip()
    m = _SET.fullmatch(text)
    if m:  # Flink trims both (OperationExecutor's callSetOperation)
        return Translation(spark_set(_unquote(m.group(1)).strip(),
                                     _unquote(m.group(2)).strip()), True)
    m = _RESET.fullmatch(text)
    if m:
        return Translation(spark_reset(_unquote(m.group(1)).strip()), True)
    m = _BARE.fullmatch(text)
    if m:
        word = m.group(1).upper()
        return Translation(word, word == "RESET")
    if _PLAIN_RESET.fullmatch(text):  # Spark's own RESET key: Flink's answer too
        return Translation(text, True)
    return None
