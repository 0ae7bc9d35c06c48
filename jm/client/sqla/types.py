"""The SQLAlchemy dialect's types (jm/client/sqla): Spark's types as SQLAlchemy's, the
values of the gateway's JSON turned back into Python types by the column's type, and the
SQL the dialect writes (identifiers, LIMIT, type names)."""
from __future__ import annotations

import datetime
import decimal
import re
from typing import Any, Callable

from sqlalchemy import types as sqltypes
from sqlalchemy.engine import default
from sqlalchemy.sql import compiler


# ---- types --------------------------------------------------------------------------------

class SparkType(sqltypes.UserDefinedType):
    """A Spark type SQLAlchemy has no generic type for (array<...>, map<...>, struct<...>,
    interval, variant, ...), named by Spark's type text; values as the gateway sends
    them (JSON: lists, objects, strings)."""
    cache_ok = True

    def __init__(self, spark_type: str = "string") -> None:
        self.spark_type = spark_type

    def get_col_spec(self, **kw: Any) -> str:
        return self.spark_type

    def __repr__(self) -> str:
        return f"SparkType({self.spark_type!r})"


_DOUBLE = getattr(sqltypes, "DOUBLE", sqltypes.FLOAT)  # (SQLAlchemy 1.4 has no DOUBLE)
_SIMPLE_TYPES: dict[str, Any] = {
    "tinyint": sqltypes.SMALLINT, "byte": sqltypes.SMALLINT, "smallint": sqltypes.SMALLINT,
    "short": sqltypes.SMALLINT, "int": sqltypes.INTEGER, "integer": sqltypes.INTEGER,
    "bigint": sqltypes.BIGINT, "long": sqltypes.BIGINT, "float": sqltypes.REAL,
    "real": sqltypes.REAL, "double": _DOUBLE, "string": sqltypes.String,
    "boolean": sqltypes.BOOLEAN, "date": sqltypes.DATE, "timestamp": sqltypes.TIMESTAMP,
    "timestamp_ltz": sqltypes.TIMESTAMP, "timestamp_ntz": sqltypes.TIMESTAMP,
    "binary": sqltypes.BINARY, "decimal": sqltypes.DECIMAL, "numeric": sqltypes.DECIMAL,
    "dec": sqltypes.DECIMAL,
}


def spark_type(text: str) -> sqltypes.TypeEngine:
    """A type as `DESCRIBE` prints it (int, decimal(10,2), array<string>, ...) as a
    SQLAlchemy type."""
    t = (text or "").strip().lower()
    if t in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[t]()
    m = re.fullmatch(r"(decimal|numeric|dec)\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)", t)
    if m:
        return sqltypes.DECIMAL(int(m.group(2)), int(m.group(3) or 0))
    m = re.fullmatch(r"(varchar|char)\s*\(\s*(\d+)\s*\)", t)
    if m:
        return (sqltypes.VARCHAR if m.group(1) == "varchar" else sqltypes.CHAR)(int(m.group(2)))
    return SparkType((text or "").strip())


def _date(v: Any) -> Any:
    return datetime.date.fromisoformat(v) if isinstance(v, str) else v


def _datetime(v: Any) -> Any:
    return datetime.datetime.fromisoformat(v) if isinstance(v, str) else v


def _decimal(v: Any) -> Any:
    return decimal.Decimal(v) if isinstance(v, (str, int)) else v


def _float(v: Any) -> Any:
    return float(v) if isinstance(v, str) else v   # (NaN and infinities come as strings)


def _binary(v: Any) -> Any:
    return bytes.fromhex(v) if isinstance(v, str) else v


# the gateway's JSON values back to Python, by the column's type in cursor.description
WIRE: dict[str, Callable[[Any], Any]] = {
    "DATE": _date, "TIMESTAMP_WITH_LOCAL_TIME_ZONE": _datetime,
    "TIMESTAMP_WITHOUT_TIME_ZONE": _datetime, "DECIMAL": _decimal, "DOUBLE": _float,
    "FLOAT": _float, "BINARY": _binary, "VARBINARY": _binary,
}


# ---- SQL ------------------------------------------------------------------------------------

class JmIdentifierPreparer(compiler.IdentifierPreparer):
    def __init__(self, dialect: Any) -> None:
        super().__init__(dialect, initial_quote="`", escape_quote="`")


class JmCompiler(compiler.SQLCompiler):
    def limit_clause(self, select: Any, **kw: Any) -> str:
        # Spark takes OFFSET without LIMIT (not LIMIT -1)
        text = ""
        if select._limit_clause is not None:
            text += "\n LIMIT " + self.process(select._limit_clause, **kw)
        if select._offset_clause is not None:
            text += "\n OFFSET " + self.process(select._offset_clause, **kw)
        return text


class JmTypeCompiler(compiler.GenericTypeCompiler):
    """Spark SQL's names for CREATE TABLE (pandas' to_sql, metadata.create_all)."""

    def visit_string(self, type_: Any, **kw: Any) -> str:
        return "STRING"

    visit_unicode = visit_text = visit_unicode_text = visit_TEXT = visit_CLOB = visit_string

    def visit_VARCHAR(self, type_: Any, **kw: Any) -> str:
        return f"VARCHAR({type_.length})" if type_.length else "STRING"

    def visit_NVARCHAR(self, type_: Any, **kw: Any) -> str:
        return self.visit_VARCHAR(type_, **kw)

    def visit_FLOAT(self, type_: Any, **kw: Any) -> str:
        return "DOUBLE"

    def visit_REAL(self, type_: Any, **kw: Any) -> str:
        return "FLOAT"

    def visit_DOUBLE_PRECISION(self, type_: Any, **kw: Any) -> str:
        return "DOUBLE"

    def visit_DATETIME(self, type_: Any, **kw: Any) -> str:
        return "TIMESTAMP"

    def visit_TIME(self, type_: Any, **kw: Any) -> str:
        return "STRING"

    def visit_large_binary(self, type_: Any, **kw: Any) -> str:
        return "BINARY"

    visit_BLOB = visit_BINARY = visit_VARBINARY = visit_large_binary

    def visit_uuid(self, type_: Any, **kw: Any) -> str:
        return "STRING"

    def visit_JSON(self, type_: Any, **kw: Any) -> str:
        return "STRING"


class JmExecutionContext(default.DefaultExecutionContext):
    def should_autocommit_text(self, statement: str) -> bool:
        """SQLAlchemy 1.4's "autocommit" of a DDL or DML text outside a transaction (and
        its warning): Spark SQL has no transactions to commit. (2.x never asks.)"""
        return False

    def get_result_processor(self, type_: Any, colname: str, coltype: Any) -> Any:
        wire = WIRE.get(coltype) if isinstance(coltype, str) else None
        proc = type_._cached_result_processor(self.dialect, coltype)
        if wire is None or proc is None:
            return wire or proc
        return lambda value: proc(wire(value))
