"""What a statement does to its session, told by a Spark SQL parser: sqlglot's Spark
dialect (pure: no I/O, no clock; but a third-party package, so the light client, which
splits with jm/policy/sql/sqlstmt.py, never imports this module). The server's classifier:
the same kinds (STATE, READ, WRITE: see jm/policy/sql/sqlstmt.py) and temporary views, read
from a syntax tree instead of a statement's first words.

* A text is split with sqlglot's Spark tokenizer (nested bracketed comments, raw strings
  r'...', backslash escapes, backquoted names) and each statement parsed on its own; a
  text of several statements is WRITE if one is, else STATE if one is, else READ.
* A statement sqlglot does not know (a parse error, or one it keeps as an opaque command
  or reads as a bare expression: SHOW, EXPLAIN, ADD JAR, SET -v, RESET, LIST, ...) is
  classified by sqlstmt's keyword rules; so is a text sqlglot cannot tokenize (an
  unterminated quote or comment: Spark refuses it anyway) and a text longer than
  PARSE_MAX characters (parsing costs over a millisecond per KB: bench/sqlparse.py).
* A statement is READ only if its whole tree holds no write (WITH ... INSERT, FROM ...
  INSERT); a tree of any kind not named here is WRITE.
"""
from __future__ import annotations

from typing import Callable, Iterable, Union

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.tokens import TokenType

from jm.policy.sql import sqlstmt
from jm.policy.sql.sqlstmt import READ, STATE, WRITE

PARSE_MAX = 64 * 1024   # characters: a longer text is split and classified by keywords
GLOBAL_TEMP = "global_temp"   # Spark's spark.sql.globalTempDatabase (default)

_DIALECT = Spark()
_RANK = {READ: 0, STATE: 1, WRITE: 2}
# a node anywhere in a query's tree that makes it more than a read
_WRITES = (exp.DML, exp.DDL, exp.Drop, exp.Alter, exp.Command, exp.TruncateTable,
           exp.MultitableInserts, exp.Set, exp.Use, exp.Cache, exp.Uncache, exp.Declare)
# roots that are statements sqlglot understood (any other root: sqlglot read the text as
# an expression, e.g. `RESET` as a column; the keyword rules decide)
_STATEMENTS = (exp.Query, exp.Values, exp.DML, exp.DDL, exp.Drop, exp.Alter, exp.Set,
               exp.Use, exp.Cache, exp.Uncache, exp.Refresh, exp.Describe, exp.Declare,
               exp.TruncateTable, exp.MultitableInserts, exp.Analyze, exp.Comment,
               exp.Transaction, exp.Commit, exp.Rollback)

Views = Union[Iterable[str], Callable[[], Iterable[str]]]


class _Parser(Spark.Parser):
    def _warn_unsupported(self) -> None:
        """Quiet: sqlglot logs every statement it keeps as a command (SHOW, EXPLAIN,
        ...); here those are expected, and the keyword rules classify them."""


def _chunks(text: str) -> list[tuple[str, list]] | None:
    """The statements of a text, each (its text, its tokens), split at `;` tokens;
    empty ones dropped. None if the text cannot be tokenized."""
    try:
        tokens = _DIALECT.tokenize(text)
    except Exception:  # TokenError; never a crash of the caller
        return None
    out, cur, start = [], [], 0
    for tok in tokens + [None]:
        if tok is None or tok.token_type == TokenType.SEMICOLON:
            end = len(text) if tok is None else tok.start
            if cur:
                out.append((text[start:end].strip(), cur))
            cur, start = [], end + 1
        else:
            cur.append(tok)
    return out


def split_statements(script: str) -> list[str]:
    """Statements of a script (as sqlstmt.split_statements, by sqlglot's tokenizer; by
    sqlstmt's where it cannot tokenize the script)."""
    chunks = _chunks(script)
    if chunks is None:
        return sqlstmt.split_statements(script)
    return [t for t, _ in chunks]


def _parse(text: str, tokens: list) -> exp.Expr | None:
    """The tree of the statement of `tokens` (in `text`, the whole text they come from);
    None where sqlglot does not know the statement."""
    try:
        trees = _Parser(dialect=_DIALECT).parse(tokens, text)
    except Exception:  # ParseError (or a bug of sqlglot's, RecursionError): not known
        return None
    if len(trees) != 1 or not isinstance(trees[0], _STATEMENTS):
        return None
    return trees[0]


def _temporary(node: exp.Expr) -> bool:
    props = node.args.get("properties")
    return bool(node.args.get("temporary")) or (
        props is not None and any(isinstance(p, exp.TemporaryProperty)
                                  for p in props.expressions))


def _table_name(node) -> tuple[str, str] | None:
    """(database, name) of a view, both lower case ("" without a database)."""
    if isinstance(node, exp.Schema):
        node = node.this
    if not isinstance(node, exp.Table) or not node.name:
        return None
    return node.db.lower(), node.name.lower()


def _view_change(tree: exp.Expr) -> tuple[bool, str] | None:
    """(True, name) for a tree defining a temporary view (CREATE TEMP VIEW, the deprecated
    CREATE TEMPORARY TABLE ... USING, CACHE TABLE x AS ...), (False, name) for a DROP VIEW
    (of a temporary view, if the session has one of that name), else None."""
    kind = str(tree.args.get("kind") or "").upper()
    if isinstance(tree, exp.Create) and kind in ("VIEW", "TABLE") and _temporary(tree):
        name = _table_name(tree.this)
        return None if name is None else (True, name[1])
    if isinstance(tree, exp.Cache) and tree.args.get("expression") is not None:
        name = _table_name(tree.this)
        return None if name is None else (True, name[1])
    if isinstance(tree, exp.Drop) and kind == "VIEW":
        tables = tree.args.get("tables") or [tree.this]
        name = _table_name(tables[0]) if len(tables) == 1 else None
        if name is not None and name[0] in ("", GLOBAL_TEMP):
            return False, name[1]
    return None


def _kind(tree: exp.Expr, views: Callable[[], set[str]]) -> str:
    if isinstance(tree, exp.Uncache):
        return READ
    if isinstance(tree, (exp.Query, exp.Values, exp.Describe, exp.Refresh)):
        return READ if tree.find(*_WRITES) is None else WRITE
    if isinstance(tree, exp.Set):
        # SET alone shows the settings; SET k = v, SET 'k' = 'v', SET VAR x = 1 define
        return STATE if tree.expressions or tree.args.get("unset") else READ
    if isinstance(tree, (exp.Use, exp.Declare)):
        return STATE
    if isinstance(tree, exp.Cache):
        return STATE if tree.args.get("expression") is not None else READ
    kind = str(tree.args.get("kind") or "").upper()
    if isinstance(tree, exp.Create):
        if _temporary(tree) and kind in ("VIEW", "FUNCTION", "TABLE"):
            return STATE
        return WRITE
    if isinstance(tree, exp.Drop):
        if tree.args.get("temporary"):  # DROP TEMPORARY VIEW / FUNCTION
            return STATE
        change = _view_change(tree)
        if change is not None and change[1] in views():
            return STATE
        return WRITE
    return WRITE


def _views_of(session_views: Views) -> Callable[[], set[str]]:
    done: list[set[str]] = []

    def get() -> set[str]:
        if not done:
            got = session_views() if callable(session_views) else session_views
            done.append({v.lower() for v in got})
        return done[0]
    return get


def classify(statement: str, session_views: Views = ()) -> str:
    """STATE, READ or WRITE (jm/policy/sql/sqlstmt.py). `session_views`: the session's
    temporary views (lower case), or a function giving them, called only for a DROP VIEW
    that does not say TEMPORARY (the one statement that needs them)."""
    views = _views_of(session_views)
    chunks = _chunks(statement) if len(statement) <= PARSE_MAX else None
    if chunks is None:
        return _worst(_keywords(p, views) for p in sqlstmt.split_statements(statement))
    return _worst(_keywords(text, views) if tree is None else _kind(tree, views)
                  for text, tree in ((t, _parse(statement, toks)) for t, toks in chunks))


def _keywords(text: str, views: Callable[[], set[str]]) -> str:
    """sqlstmt's keyword rules (the session's views only for a DROP VIEW)."""
    change = sqlstmt.view_change(text)
    return sqlstmt.classify(text, views() if change is not None and not change[0] else ())


def _worst(kinds: Iterable[str]) -> str:
    return max(kinds, key=_RANK.__getitem__, default=READ)


def temp_views(statements: Iterable[str]) -> set[str]:
    """Temporary views a session's state-defining statements leave (by name, lower case)."""
    views: set[str] = set()
    for s in statements:
        chunks = _chunks(s) if len(s) <= PARSE_MAX else None
        if chunks is None:
            changes = [sqlstmt.view_change(p) for p in sqlstmt.split_statements(s)]
        else:
            changes = []
            for text, tokens in chunks:
                tree = _parse(s, tokens)
                changes.append(sqlstmt.view_change(text) if tree is None
                               else _view_change(tree))
        for change in changes:
            if change is not None:
                (views.add if change[0] else views.discard)(change[1])
    return views
