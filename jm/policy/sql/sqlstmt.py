"""SQL text, without Spark (pure): split a script into statements and tell what a
statement does to its session, which decides what the SQL gateway replicates and what it
may run again after a failover.

* STATE: defines the session (SET, RESET, USE, ADD JAR/FILE/ARCHIVE, temporary views
  and functions, session variables, CACHE ... AS): replicated in order and replayed on
  the session's next peer;
* READ: reads only (SELECT, WITH, VALUES, TABLE, FROM, SHOW, DESCRIBE, EXPLAIN, LIST):
  run again on the next peer if its peer died while it ran;
* WRITE: anything else (INSERT, CTAS, DDL on tables, ...): never run twice; after a
  failover during one the client hears it may or may not have run.

Standard library only: the light client (jm/client/cli_sql.py) splits scripts with it.
The server classifies with a Spark SQL parser (jm/policy/sql/sqlparse.py), which falls back
to the keyword rules here for statements the parser does not know.
"""
from __future__ import annotations

import re
from typing import Iterable


STATE, READ, WRITE = "state", "read", "write"

_READ_HEADS = {"SELECT", "WITH", "VALUES", "TABLE", "FROM", "SHOW", "DESC", "DESCRIBE",
               "EXPLAIN", "LIST", "UNCACHE", "REFRESH"}
_WRITE_WORDS = {"INSERT", "MERGE", "UPDATE", "DELETE", "OVERWRITE"}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|`[^`]*`|\S")
_BRACKETS = re.compile(r"/\*|\*/")


def statement_pieces(sql: str):
    """The text in pieces: ("quote", '...'), ("comment", '-- ...' or '/* ... */'), or
    ("char", c) for each other character. As Spark's lexer: a backslash escapes the next
    character in '...' and "..." but not in a raw string r'...' (nor in `...`), and
    bracketed comments nest (SPARK-28880)."""
    i, n = 0, len(sql)
    while i < n:
        c = sql[i]
        raw = c in "rR" and sql[i + 1:i + 2] in ("'", '"') \
            and not (i and (sql[i - 1].isalnum() or sql[i - 1] == "_"))
        if raw or c in "'\"`":
            q = sql[i + 1] if raw else c
            j = i + 2 if raw else i + 1
            while j < n and sql[j] != q:
                j += 2 if sql[j] == "\\" and q != "`" and not raw else 1
            yield "quote", sql[i:j + 1]
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i + 2)
            j = n if j < 0 else j
            yield "comment", sql[i:j]
            i = j
        elif sql.startswith("/*", i):
            depth, j = 0, i
            for m in _BRACKETS.finditer(sql, i):
                depth += 1 if m.group() == "/*" else -1
                j = m.end()
                if not depth:
                    break
            else:
                j = n  # unterminated: the comment runs to the end
            yield "comment", sql[i:j]
            i = j
        else:
            yield "char", c
            i += 1


def strip_comments(sql: str) -> str:
    """The statement without its comments (`-- ...` and `/* ... */`), keeping quoted
    text as it is."""
    return "".join(" " if kind == "comment" and text.startswith("/*") else text
                   for kind, text in statement_pieces(sql)
                   if kind != "comment" or text.startswith("/*"))


def split_statements(script: str) -> list[str]:
    """Statements of a script, split at `;` outside quotes and comments; empty ones
    dropped, each stripped and without its `;`."""
    stmts: list[str] = []
    cur: list[str] = []
    for kind, text in statement_pieces(script):
        if kind == "char" and text == ";":
            stmts.append("".join(cur))
            cur = []
        else:
            cur.append(text)
    stmts.append("".join(cur))
    return [s.strip() for s in stmts if strip_comments(s).strip()]


def complete(buffer: str) -> bool:
    """Whether an interactive buffer ends a statement (a `;` outside quotes and
    comments, with nothing but blanks or comments after it)."""
    text = strip_comments(buffer).rstrip()
    if not text.endswith(";"):
        return False
    # an unterminated quote swallows the `;`: split_statements then keeps one piece
    return len(split_statements(buffer + "\nSELECT")) >= 2


def _words(sql: str, k: int = 6) -> list[str]:
    return [w.upper() for w in _WORD.findall(strip_comments(sql))[:k]]


def _name(word: str) -> str:
    return word.strip("`").lower()


def temp_views(statements: Iterable[str]) -> set[str]:
    """Temporary views a session's state-defining statements leave (by name, lower case)."""
    views: set[str] = set()
    for s in statements:
        change = view_change(s)
        if change is not None:
            (views.add if change[0] else views.discard)(change[1])
    return views


def view_change(statement: str) -> tuple[bool, str] | None:
    """(True, name) for a statement defining a temporary view, (False, name) for a DROP
    VIEW (name in lower case), None for any other."""
    words = _WORD.findall(strip_comments(statement))
    up = [w.upper() for w in words]
    name = _view_name(up, words)
    if name is not None:
        return True, name
    if up[:2] == ["DROP", "VIEW"] or up[:3] == ["DROP", "TEMPORARY", "VIEW"]:
        rest = words[3:] if up[1] == "TEMPORARY" else words[2:]
        if [w.upper() for w in rest[:2]] == ["IF", "EXISTS"]:
            rest = rest[2:]
        if rest:
            return False, _name(rest[0])
    return None


def _view_name(up: list[str], words: list[str]) -> str | None:
    """The name a CREATE [OR REPLACE] [GLOBAL] TEMP[ORARY] VIEW or CACHE TABLE x AS defines."""
    i = 1
    if up[:1] == ["CREATE"]:
        if up[1:3] == ["OR", "REPLACE"]:
            i = 3
        if i < len(up) and up[i] == "GLOBAL":
            i += 1
        if i + 1 < len(up) and up[i] in ("TEMP", "TEMPORARY") and up[i + 1] == "VIEW":
            i += 2
            if up[i:i + 3] == ["IF", "NOT", "EXISTS"]:
                i += 3
            return _name(words[i]) if i < len(words) else None
        return None
    if up[:1] == ["CACHE"]:
        i = 2 if up[1:2] == ["LAZY"] else 1
        if i < len(up) and up[i] == "TABLE" and "AS" in up[i + 2:i + 4]:
            return _name(words[i + 1])
    return None


def classify(statement: str, session_views: Iterable[str] = ()) -> str:
    """STATE, READ or WRITE (see the module's doc). `session_views`: the session's
    temporary views, so that a DROP VIEW of one of them defines state, not a write."""
    words = _WORD.findall(strip_comments(statement))
    up = [w.upper() for w in words[:8]]
    if not up:
        return READ
    head = up[0]
    if head == "SET" and "=" not in words and up[1:3] != ["TIME", "ZONE"]:
        return READ  # SET, SET -v, SET key: show settings
    if head in ("SET", "RESET", "USE", "DECLARE"):  # DECLARE: a session variable
        return STATE
    if head == "ADD" and up[1:2] and up[1] in ("JAR", "JARS", "FILE", "FILES", "ARCHIVE",
                                               "ARCHIVES"):
        return STATE
    if _view_name(up, words) is not None:
        return STATE
    if head == "CREATE" and "FUNCTION" in up[:6] and ("TEMPORARY" in up[:5] or "TEMP" in up[:5]):
        return STATE
    if head == "DROP":
        if up[1:2] in (["TEMPORARY"], ["TEMP"]):
            return STATE
        if up[1:2] == ["VIEW"]:
            rest = words[2:]
            if [w.upper() for w in rest[:2]] == ["IF", "EXISTS"]:
                rest = rest[2:]
            views = {v.lower() for v in session_views}
            if rest and _name(rest[0]) in views:
                return STATE
        return WRITE
    if head == "CACHE":
        return READ  # a cache of a table: not the session's (CACHE ... AS is above)
    if head in ("WITH", "FROM", "("):  # a query, unless it feeds a write
        if any(w.upper() in _WRITE_WORDS for w in words):
            return WRITE
        return READ if head != "(" or up[1:2] and up[1] in _READ_HEADS | {"("} else WRITE
    if head in _READ_HEADS:
        return READ
    return WRITE
