"""Python DB-API 2.0 (PEP 249) over the cluster's SQL gateway, standard library only:

    from jm.client import dbapi
    conn = dbapi.connect("http://peer1:8081,http://peer2:8081")
    # https with a private CA: dbapi.connect("https://peer1:8081", cafile="ca.pem")
    cur = conn.cursor()
    cur.execute("SELECT id, id * 2 AS twice FROM range(%(n)s)", {"n": 5})
    cur.description, cur.fetchall()
    pandas.read_sql("SELECT ...", conn)   # (pandas warns: an engine of jm/client/sqla.py does not)

One connection is one gateway session (its temporary views and SET properties persist
across cursors). Rows are read from the gateway a page at a time as they are fetched.
Transactions do not exist in Spark SQL: commit() does nothing and rollback() raises
NotSupportedError. Parameters use the `pyformat` style and are quoted here.
`cursor.rowcount` is a query's number of rows once they have all been fetched (-1
before), the count Spark reports for a write that reports one (a result whose columns
include `num_affected_rows` or `num_inserted_rows`, as Delta's DML gives), else -1.
Values are as the gateway sends them (JSON: dates, timestamps and decimals as strings);
SQLAlchemy's dialect (jm/client/sqla.py) turns them into Python types.
"""
from __future__ import annotations

import datetime
import decimal
from typing import Any, Iterator, Optional, Sequence

from jm.client.cli_http import DEFAULT_TIMEOUT, CliError, Client
from jm.client.sqlsession import Result, SqlSession, StatementFailed

apilevel = "2.0"
threadsafety = 1  # threads may share the module, not connections
paramstyle = "pyformat"


class Error(Exception):
    pass


class Warning(Exception):  # noqa: A001  (PEP 249's name)
    pass


class InterfaceError(Error):
    pass


class DatabaseError(Error):
    pass


class OperationalError(DatabaseError):
    pass


class ProgrammingError(DatabaseError):
    pass


class NotSupportedError(DatabaseError):
    pass


class DataError(DatabaseError):
    pass


class IntegrityError(DatabaseError):
    pass


class InternalError(DatabaseError):
    pass


# type objects (PEP 249), matched against the Flink logical type names in description
class _Type(frozenset):
    def __eq__(self, other: Any) -> bool:
        return other in self if isinstance(other, str) else frozenset.__eq__(self, other)

    __hash__ = frozenset.__hash__


STRING = _Type({"CHAR", "VARCHAR"})
BINARY = _Type({"BINARY", "VARBINARY"})
NUMBER = _Type({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL"})
DATETIME = _Type({"DATE", "TIMESTAMP_WITHOUT_TIME_ZONE", "TIMESTAMP_WITH_LOCAL_TIME_ZONE"})
ROWID = _Type()

# the columns through which Spark reports a write's count (Delta's DML, for one)
AFFECTED = frozenset({"num_affected_rows", "num_inserted_rows"})


def quote(value: Any) -> str:
    """A Python value as a Spark SQL literal."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float, decimal.Decimal)):
        return repr(value) if not isinstance(value, decimal.Decimal) else str(value)
    if isinstance(value, datetime.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, datetime.date):
        return f"DATE '{value.isoformat()}'"
    if isinstance(value, (bytes, bytearray)):
        return f"X'{bytes(value).hex()}'"
    if isinstance(value, (list, tuple)):
        return "(" + ", ".join(quote(v) for v in value) + ")"
    text = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


def bind(operation: str, parameters: Any) -> str:
    if parameters is None:
        return operation
    if isinstance(parameters, dict):
        return operation % {k: quote(v) for k, v in parameters.items()}
    if isinstance(parameters, (list, tuple)):
        return operation % tuple(quote(v) for v in parameters)
    raise ProgrammingError("parameters must be a mapping or a sequence")


class Cursor:
    arraysize = 1

    def __init__(self, conn: "Connection") -> None:
        self.connection = conn
        self.description: Optional[list[tuple]] = None
        self.rowcount = -1
        self._rows: Optional[Iterator[list]] = None
        self._result: Optional[Result] = None
        self._seen = 0   # rows fetched of the current result (its rowcount once all are)
        self.closed = False

    def _check(self) -> None:
        if self.closed or self.connection.closed:
            raise InterfaceError("the cursor or its connection is closed")

    def execute(self, operation: str, parameters: Any = None) -> "Cursor":
        self._check()
        sql = bind(operation, parameters)
        try:
            result = self.connection._session.execute(sql)
        except StatementFailed as exc:
            # one line (Spark's error class and message); the whole text: exc.detail
            raise (OperationalError if exc.status >= 500 or exc.status == 409
                   else ProgrammingError)(str(exc)) from exc
        except CliError as exc:
            raise OperationalError(str(exc))
        self._result = result
        self.description = [(c.get("name"), (c.get("logicalType") or {}).get("type"), None, None,
                             (c.get("logicalType") or {}).get("precision"),
                             (c.get("logicalType") or {}).get("scale"),
                             (c.get("logicalType") or {}).get("nullable", True))
                            for c in result.columns] or None
        self._rows = result.rows()
        self._seen = 0
        self.rowcount = -1
        names = {str(n).lower() for n in result.names}
        if not result.is_query and names & AFFECTED:
            self._affected(result)
        return self

    def _affected(self, result: Result) -> None:
        """A write that reports its count (one row): rowcount is that count; the row can
        still be fetched."""
        try:
            rows = list(self._rows or ())
        except StatementFailed as exc:
            raise OperationalError(str(exc))
        self._rows = iter(rows)
        if len(rows) == 1:
            row = dict(zip((str(n).lower() for n in result.names), rows[0]))
            for key in ("num_affected_rows", "num_inserted_rows"):
                try:
                    self.rowcount = int(row[key])
                    return
                except (KeyError, TypeError, ValueError):
                    continue

    def executemany(self, operation: str, seq_of_parameters: Sequence[Any]) -> None:
        for params in seq_of_parameters:
            self.execute(operation, params)

    def _next(self) -> Optional[tuple]:
        self._check()
        if self._rows is None:
            raise ProgrammingError("no statement has been executed")
        try:
            row = tuple(next(self._rows))
        except StopIteration:
            if self.rowcount < 0 and self.description is not None:
                self.rowcount = self._seen  # every row of the result has been read
            return None
        except StatementFailed as exc:
            raise OperationalError(str(exc))
        self._seen += 1
        return row

    def fetchone(self) -> Optional[tuple]:
        return self._next()

    def fetchmany(self, size: Optional[int] = None) -> list[tuple]:
        out = []
        for _ in range(self.arraysize if size is None else size):
            row = self._next()
            if row is None:
                break
            out.append(row)
        return out

    def fetchall(self) -> list[tuple]:
        out = []
        while True:
            row = self._next()
            if row is None:
                return out
            out.append(row)

    def __iter__(self) -> Iterator[tuple]:
        while True:
            row = self._next()
            if row is None:
                return
            yield row

    def setinputsizes(self, sizes: Any) -> None:
        pass

    def setoutputsize(self, size: Any, column: Any = None) -> None:
        pass

    def cancel(self) -> None:
        if self._result is not None:
            self.connection._session.cancel(self._result.op)

    def close(self) -> None:
        if self._result is not None and not self._result.done:
            self.connection._session.close_operation(self._result.op)
        self.closed = True
        self._rows = None

    def __enter__(self) -> "Cursor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Connection:
    def __init__(self, session: SqlSession) -> None:
        self._session = session
        self.closed = False

    @property
    def session_handle(self) -> str:
        return self._session.handle

    def cursor(self) -> Cursor:
        if self.closed:
            raise InterfaceError("the connection is closed")
        return Cursor(self)

    def commit(self) -> None:  # Spark SQL has no transactions: every statement is final
        pass

    def rollback(self) -> None:
        raise NotSupportedError("Spark SQL has no transactions to roll back")

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self._session.close()
            except CliError:
                pass

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def connect(addresses: Any = "http://127.0.0.1:8081", token: Optional[str] = None,
            properties: Optional[dict] = None, timeout: float = DEFAULT_TIMEOUT,
            name: str = "", cafile: Optional[str] = None) -> Connection:
    """A connection (one gateway session) through any of `addresses` (a list, or a
    comma-separated string of peer REST addresses; https ones are checked against the
    system's CAs, or against `cafile`'s, a PEM bundle, for a private CA)."""
    if isinstance(addresses, (list, tuple)):
        addresses = ",".join(addresses)
    if cafile:  # (the client would load it at its first request, naming its CLI option)
        import ssl
        try:
            ssl.create_default_context(cafile=cafile)
        except (OSError, ssl.SSLError) as exc:
            raise InterfaceError(f"cafile {cafile}: {exc}")
    try:
        return Connection(SqlSession(Client(str(addresses), timeout, token, ca_file=cafile),
                                     properties, name))
    except CliError as exc:
        raise OperationalError(str(exc))
