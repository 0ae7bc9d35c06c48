"""Completion hints for Flink's `complete-statement` (pure: no I/O, standard library):
the words that may replace the word being typed at a position of a statement (Flink's
CompleteStatementResponseBody `candidates`), from Spark SQL's keywords and the names the
gateway gathered for the session (its tables and views, Spark's functions).

Keywords come in the case the word is typed in (`sel` -> `select`, `SEL` -> `SELECT`);
after a word that a table name follows (FROM, JOIN, INTO, TABLE, ...) the session's
tables come first. Nothing is offered inside a quote or a comment.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from jm.policy.sql.sqlstmt import statement_pieces

KEYWORDS = tuple(sorted(set("""
ADD ALL ALTER ANALYZE AND ANTI ANY ARCHIVE ARRAY AS ASC AT BETWEEN BIGINT BINARY BOOLEAN
BOTH BUCKET BUCKETS BY CACHE CASCADE CASE CAST CHANGE CLEAR CLUSTER COLLECT COLUMN
COLUMNS COMMENT COMPUTE CREATE CROSS CUBE CURRENT CURRENT_DATE CURRENT_TIMESTAMP DATA
DATABASE DATABASES DATE DAY DECIMAL DECLARE DEFAULT DELETE DESC DESCRIBE DIRECTORY
DISTINCT DISTRIBUTE DIV DOUBLE DROP ELSE END ESCAPE EXCEPT EXISTS EXPLAIN EXTENDED
EXTERNAL EXTRACT FALSE FIELDS FILE FILTER FIRST FLOAT FOLLOWING FOR FORMAT FORMATTED FROM
FULL FUNCTION FUNCTIONS GLOBAL GRANT GROUP GROUPING HAVING HOUR IF IGNORE ILIKE IN INNER
INSERT INT INTEGER INTERSECT INTERVAL INTO IS JAR JOIN LAST LATERAL LEFT LIKE LIMIT LIST
LOAD LOCATION MAP MERGE MINUS MINUTE MONTH NATURAL NOT NULL NULLS OF OFFSET ON OPTIONS OR
ORDER OUTER OVER OVERWRITE PARTITION PARTITIONED PARTITIONS PIVOT PRECEDING PURGE QUALIFY
RANGE RECURSIVE REFRESH RENAME REPAIR REPLACE RESET RIGHT RLIKE ROLLUP ROW ROWS SCHEMA
SCHEMAS SECOND SELECT SEMI SET SETS SHOW SMALLINT SORT STRING STRUCT SYSTEM TABLE TABLES
TABLESAMPLE TBLPROPERTIES TEMP TEMPORARY THEN TIMESTAMP TINYINT TO TRUE TRUNCATE UNBOUNDED
UNCACHE UNION UNPIVOT UPDATE USE USING VALUES VAR VARIABLE VIEW VIEWS WHEN WHERE WINDOW
WITH YEAR
""".split())))

# the words a statement starts with (offered at its start with nothing typed yet)
HEADS = ("ADD", "ALTER", "ANALYZE", "CACHE", "CLEAR", "CREATE", "DECLARE", "DELETE",
         "DESCRIBE", "DROP", "EXPLAIN", "INSERT", "LIST", "MERGE", "REFRESH", "RESET",
         "SELECT", "SET", "SHOW", "TRUNCATE", "UNCACHE", "UPDATE", "USE", "VALUES", "WITH")

# after these a table (or view) name comes
TABLE_AFTER = frozenset({"FROM", "JOIN", "INTO", "TABLE", "UPDATE", "DESCRIBE", "DESC",
                         "VIEW", "EXISTS", "USING", "CACHE", "UNCACHE", "REFRESH",
                         "TRUNCATE", "OVERWRITE"})

_WORD_END = re.compile(r"[A-Za-z0-9_]*\Z")
_WORDS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class BadRequest(ValueError):
    """The request's fault (a 400), naming the field."""


@dataclass(frozen=True)
class Context:
    prefix: str          # the word typed so far at the position ("" if none)
    previous: str        # the word before it, upper case ("" at the statement's start)

    @property
    def wants_tables(self) -> bool:
        return self.previous in TABLE_AFTER


def request(body: Any) -> tuple[str, int]:
    """(statement, position) of a complete-statement request body; BadRequest naming the
    field otherwise. The position is the cursor's: 0 up to the statement's length."""
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object with statement and position")
    statement, position = body.get("statement"), body.get("position")
    if not isinstance(statement, str):
        raise BadRequest("statement is required: the statement's text (a string)")
    if isinstance(position, bool) or not isinstance(position, int):
        raise BadRequest("position is required: the cursor's offset in the statement "
                         "(an integer)")
    if not 0 <= position <= len(statement):
        raise BadRequest(f"position {position} is out of range: 0 to {len(statement)} "
                         "(the statement's length)")
    return statement, position


def context(statement: str, position: int) -> Context | None:
    """What is typed at the position; None inside a quote or a comment (no hints)."""
    before = statement[:position]
    pieces = list(statement_pieces(before))
    if pieces and pieces[-1][0] != "char":
        kind, text = pieces[-1]
        closed = (kind == "quote" and len(text) > 1 and text[-1] == text[0]
                  and not text.startswith(("r", "R"))) or \
                 (kind == "quote" and text[:1] in "rR" and len(text) > 2 and
                  text[-1] == text[1]) or (kind == "comment" and text.endswith("*/"))
        if not closed:
            return None
    prefix = _WORD_END.search(before).group()
    head = before[:len(before) - len(prefix)]
    text = "".join(t if k == "char" else " " for k, t in statement_pieces(head))
    words = _WORDS.findall(text[text.rfind(";") + 1:])  # this statement's (after a `;`)
    return Context(prefix, words[-1].upper() if words else "")


def _cased(word: str, prefix: str) -> str:
    return word.lower() if prefix and prefix.islower() else word


def candidates(ctx: Context, tables: Iterable[str] = (),
               functions: Iterable[str] = ()) -> list[str]:
    """The hints, best first, without repeats: with nothing typed, the statement heads
    at a statement's start and the tables where one is wanted; else every keyword, table
    and function starting with the typed word (case-insensitively)."""
    low = ctx.prefix.lower()

    def matching(words: Iterable[str]) -> list[str]:
        return [w for w in words if w.lower().startswith(low)]
    tables = sorted(set(tables), key=str.lower)
    if not ctx.prefix:
        if ctx.wants_tables:
            return list(tables)
        return list(HEADS) if not ctx.previous else []
    keys = [_cased(k, ctx.prefix) for k in matching(KEYWORDS)]
    funcs = sorted({f for f in functions if f.replace("_", "").isalnum()}, key=str.lower)
    groups = (matching(tables), keys, matching(funcs)) if ctx.wants_tables \
        else (keys, matching(funcs), matching(tables))
    out: list[str] = []
    seen: set[str] = set()
    for group in groups:
        for w in group:
            if w.lower() not in seen:
                seen.add(w.lower())
                out.append(w)
    return out
