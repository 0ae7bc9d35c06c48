"""A SQLAlchemy dialect (1.4 and 2.x) over the DB-API module (jm/client/dbapi.py): the cluster's SQL
gateway (Spark SQL) for SQLAlchemy, pandas and tools built on them (Superset, ...).

    pip install 'jm-cluster[sqlalchemy]'     # (SQLAlchemy; the entry point registers jm://)
    engine = sqlalchemy.create_engine("jm://peer1:8081/?peers=peer2:8081,peer3:8081")
    pandas.read_sql("SELECT * FROM range(10)", engine)

The URL: `jm://[:TOKEN@]HOST[,HOST2...][:PORT][/DATABASE][?OPTIONS]`

* HOST[:PORT]: a peer's REST address (port 8081 by default); more peers of the cluster
  (any peer serves any session; the client moves on when one does not answer) in
  `peers=host2:port2,host3:port3` (SQLAlchemy's URL parser takes no port inside a
  comma-separated host list; `HOST1,HOST2:PORT` means every host on PORT);
* DATABASE: `USE`d at the start of each connection (Spark's current database);
* `tls=1`: https (the default once `cafile` is given); `cafile=PATH`: the PEM bundle of
  a private CA;
* `token=...` (or the URL's password): the bearer token (rest.auth.token);
* `timeout=SECONDS`: each request's retry budget; `name=...`: the session's name;
* `spark.*=VALUE`: session properties (`?spark.sql.shuffle.partitions=4`).

Each pooled connection is one gateway session. Spark SQL has no transactions:
SQLAlchemy's begin, commit and rollback do nothing (the pool's rollback on return
too), and the only isolation level is AUTOCOMMIT. Parameters are bound on the client
(the DB-API's `pyformat`, values quoted as Spark SQL literals): the gateway's statement
API takes one statement string, without parameters. A textual statement run without
parameters (`exec_driver_sql`, `pandas.read_sql("...")`) is sent as it is, so `%` needs
no doubling there. Result values come from the gateway as JSON; the dialect turns
dates, timestamps, decimals and binary back into Python types by the column's type.

Reflection reads `SHOW DATABASES`, `SHOW TABLES`, `SHOW VIEWS` (the session's temporary
views are views of the current database) and `DESCRIBE TABLE` (types mapped from
Spark's; arrays, maps, structs and the rest as `SparkType`, a generic type named by
Spark's type text). Spark tables have no keys, indexes or constraints to reflect.

Only this module imports SQLAlchemy; SQLAlchemy loads it by the `sqlalchemy.dialects`
entry point, and nothing else in jm/client imports it, so the light client stays
standard-library only (tests/unit/test_import_rules.py).
"""
from __future__ import annotations

import functools
import re

from typing import Any, Callable, Optional

from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import default, reflection

from jm.client.sqla.types import (  # noqa: F401  (SparkType, WIRE: re-exported)
    WIRE, JmCompiler, JmExecutionContext, JmIdentifierPreparer, JmTypeCompiler, SparkType,
    spark_type)

# the text of a query, never a table's name: pandas.read_sql asks has_table(its text)
# first, which would list the tables for every query
QUERY_TEXT = re.compile(r"\s*(select|with|values|show|describe|desc|explain|from|table)\s",
                        re.IGNORECASE)


def _cache(fn: Callable) -> Callable:
    """SQLAlchemy's reflection cache (`info_cache`, one inspection's), as
    `reflection.cache` keeps it; its own decorator in SQLAlchemy 1.4 cannot take this
    module's annotations (strings: `from __future__ import annotations`)."""
    @functools.wraps(fn)
    def cached(self: Any, connection: Any, *args: Any, **kw: Any) -> Any:
        info_cache = kw.get("info_cache")
        if info_cache is None:
            return fn(self, connection, *args, **kw)
        key = (fn.__name__, tuple(a for a in args if isinstance(a, str)),
               tuple((k, v) for k, v in kw.items() if k not in ("info_cache", "unreflectable")))
        if key not in info_cache:
            info_cache[key] = fn(self, connection, *args, **kw)
        return info_cache[key]
    return cached


DEFAULT_PORT = 8081
URL_FORM = "jm://[:TOKEN@]HOST[:PORT][/DATABASE][?peers=HOST2:PORT2,...&tls=1&cafile=PATH]"
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


# ---- the URL --------------------------------------------------------------------------------

def _flag(key: str, value: str) -> bool:
    v = str(value).strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise sa_exc.ArgumentError(f"jm:// URL: {key}={value!r} is not a boolean (1 or 0)")


def _hostport(item: str, port: int) -> str:
    """host, host:port, [v6] or [v6]:port (an IPv6 address alone: without brackets)."""
    item = item.strip()
    if item.startswith("["):
        return item if "]:" in item else f"{item}:{port}"
    if item.count(":") > 1:
        return f"[{item}]:{port}"
    return item if ":" in item else f"{item}:{port}"


def connect_args(url: Any) -> dict:
    """The DB-API connect() arguments for a jm:// URL (sqlalchemy.engine.URL)."""
    query = {k: (v[-1] if isinstance(v, tuple) else v) for k, v in url.query.items()}
    peers = url.query.get("peers", ())
    peers = [peers] if isinstance(peers, str) else list(peers)
    if not url.host:
        raise sa_exc.ArgumentError(f"jm:// URL {url.render_as_string()!r} names no peer: "
                                   f"use {URL_FORM}")
    port = url.port or DEFAULT_PORT
    hosts = [_hostport(h, port) for h in url.host.split(",") if h.strip()]
    hosts += [_hostport(p, DEFAULT_PORT) for group in peers for p in group.split(",")
              if p.strip()]
    cafile = query.pop("cafile", None)
    tls = _flag("tls", query.pop("tls")) if "tls" in query else bool(cafile)
    scheme = "https" if tls else "http"
    out: dict[str, Any] = {"addresses": ",".join(f"{scheme}://{h}" for h in hosts)}
    query.pop("peers", None)
    if cafile:
        out["cafile"] = cafile
    token = query.pop("token", None) or url.password
    if token:
        out["token"] = token
    if "timeout" in query:
        try:
            out["timeout"] = float(query.pop("timeout"))
        except ValueError:
            raise sa_exc.ArgumentError("jm:// URL: timeout is a number of seconds")
    if "name" in query:
        out["name"] = query.pop("name")
    props = {k: v for k, v in query.items() if k.startswith("spark.")}
    if props:
        out["properties"] = props
    unknown = sorted(k for k in query if k not in props)
    if unknown:
        raise sa_exc.ArgumentError(f"jm:// URL: unknown option(s) {', '.join(unknown)} "
                                   "(peers, tls, cafile, token, timeout, name, spark.*)")
    return out


# ---- the dialect ----------------------------------------------------------------------------

class JmDialect(default.DefaultDialect):
    name = "jm"
    driver = "rest"
    supports_statement_cache = True
    default_paramstyle = "pyformat"
    statement_compiler = JmCompiler
    type_compiler_cls = JmTypeCompiler
    preparer = JmIdentifierPreparer
    execution_ctx_cls = JmExecutionContext
    supports_native_boolean = True
    supports_native_decimal = True
    supports_sane_rowcount = False
    supports_sane_multi_rowcount = False
    supports_multivalues_insert = True
    supports_default_values = False
    supports_empty_insert = False
    supports_sequences = False
    supports_alter = False         # no constraints to add
    postfetch_lastrowid = False
    div_is_floordiv = False        # Spark's `/` is true division
    max_identifier_length = 255
    supports_is_distinct_from = True

    @classmethod
    def import_dbapi(cls) -> Any:
        from jm.client import dbapi
        return dbapi

    @classmethod
    def dbapi(cls) -> Any:  # type: ignore[override]
        """SQLAlchemy 1.4's name of import_dbapi (2.x calls import_dbapi, and each
        instance's `dbapi` is then the module, in both)."""
        return cls.import_dbapi()

    def create_connect_args(self, url: Any) -> tuple[list, dict]:
        return [], connect_args(url)

    def on_connect_url(self, url: Any) -> Optional[Callable[[Any], None]]:
        """The URL's database is each connection's current one."""
        database = url.database
        if not database:
            return None
        statement = f"USE {self.identifier_preparer.quote_identifier(database)}"

        def use(conn: Any) -> None:
            cur = conn.cursor()
            try:
                cur.execute(statement)
            finally:
                cur.close()
        return use

    # Spark SQL has no transactions: every statement is final
    def do_begin(self, dbapi_connection: Any) -> None:
        pass

    def do_commit(self, dbapi_connection: Any) -> None:
        pass

    def do_rollback(self, dbapi_connection: Any) -> None:
        pass

    def get_isolation_level_values(self, dbapi_connection: Any) -> list[str]:
        return ["AUTOCOMMIT"]

    def get_isolation_level(self, dbapi_connection: Any) -> str:
        return "AUTOCOMMIT"

    def set_isolation_level(self, dbapi_connection: Any, level: str) -> None:
        pass

    def do_execute(self, cursor: Any, statement: str, parameters: Any,
                   context: Any = None) -> None:
        if not parameters and (context is None or context.compiled is None):
            cursor.execute(statement)   # a driver-level string: its `%` are its own
        else:
            cursor.execute(statement, parameters)

    def is_disconnect(self, e: Any, connection: Any, cursor: Any) -> bool:
        """The session is gone (expired, closed) or no peer answers: the pool drops it."""
        text = str(e)
        return (isinstance(e, self.dbapi.InterfaceError) and "closed" in text) or (
            isinstance(e, self.dbapi.OperationalError)
            and (("session" in text and "does not exist" in text) or "cannot reach" in text))

    def _get_server_version_info(self, connection: Any) -> Optional[tuple]:
        return None

    def _get_default_schema_name(self, connection: Any) -> Optional[str]:
        return connection.exec_driver_sql("SELECT current_database()").scalar()

    # ---- reflection ---------------------------------------------------------------------
    def _rows(self, connection: Any, statement: str) -> list:
        return [tuple(r) for r in connection.exec_driver_sql(statement).fetchall()]

    def _in(self, schema: Optional[str]) -> str:
        return f" IN {self.identifier_preparer.quote_identifier(schema)}" if schema else ""

    def _name(self, table: str, schema: Optional[str]) -> str:
        q = self.identifier_preparer.quote_identifier
        return f"{q(schema)}.{q(table)}" if schema else q(table)

    @_cache
    def _views(self, connection: Any, schema: Optional[str], **kw: Any) -> list:
        """(name, temporary) of SHOW VIEWS."""
        rows = self._rows(connection, "SHOW VIEWS" + self._in(schema))
        return [(r[1], bool(r[2])) for r in rows]

    @_cache
    def _tables(self, connection: Any, schema: Optional[str], **kw: Any) -> list:
        """(name, temporary) of SHOW TABLES (views and the session's temporary views too)."""
        rows = self._rows(connection, "SHOW TABLES" + self._in(schema))
        return [(r[1], bool(r[2])) for r in rows]

    @_cache
    def get_schema_names(self, connection: Any, **kw: Any) -> list[str]:
        return [r[0] for r in self._rows(connection, "SHOW DATABASES")]

    @_cache
    def get_table_names(self, connection: Any, schema: Optional[str] = None,
                        **kw: Any) -> list[str]:
        views = {n.lower() for n, _ in self._views(connection, schema, **kw)}
        return [n for n, temp in self._tables(connection, schema, **kw)
                if not temp and n.lower() not in views]

    @_cache
    def get_view_names(self, connection: Any, schema: Optional[str] = None,
                       **kw: Any) -> list[str]:
        """The database's views, and with no schema given, the session's temporary views."""
        return [n for n, temp in self._views(connection, schema, **kw)
                if not temp or schema is None]

    @_cache
    def get_temp_view_names(self, connection: Any, schema: Optional[str] = None,
                            **kw: Any) -> list[str]:
        return [n for n, temp in self._views(connection, None, **kw) if temp]

    def get_temp_table_names(self, connection: Any, schema: Optional[str] = None,
                             **kw: Any) -> list[str]:
        return []

    def has_table(self, connection: Any, table_name: str, schema: Optional[str] = None,
                  **kw: Any) -> bool:
        if QUERY_TEXT.match(table_name):  # (pandas.read_sql asks this of every query)
            return False
        try:
            rows = self._rows(connection, "SHOW TABLES" + self._in(schema))
        except sa_exc.DBAPIError as exc:
            if isinstance(exc.orig, self.dbapi.ProgrammingError):
                return False   # no such database
            raise
        return any(r[1].lower() == table_name.lower() for r in rows)

    def has_schema(self, connection: Any, schema_name: str, **kw: Any) -> bool:
        return schema_name.lower() in {s.lower() for s in self.get_schema_names(connection)}

    @_cache
    def get_columns(self, connection: Any, table_name: str, schema: Optional[str] = None,
                    **kw: Any) -> list[dict]:
        try:
            rows = self._rows(connection, "DESCRIBE TABLE " + self._name(table_name, schema))
        except sa_exc.DBAPIError as exc:
            msg = str(exc.orig)
            if isinstance(exc.orig, self.dbapi.ProgrammingError) and (
                    "TABLE_OR_VIEW_NOT_FOUND" in msg or "not found" in msg.lower()):
                raise sa_exc.NoSuchTableError(self._name(table_name, schema))
            raise
        out = []
        for row in rows:
            name, type_text, comment = (row + (None, None, None))[:3]
            if not name or name.startswith("#"):   # partitioning and details follow
                break
            out.append({"name": name, "type": spark_type(type_text), "nullable": True,
                        "default": None, "comment": comment or None})
        return out

    # Spark tables have no keys, indexes or constraints
    def get_pk_constraint(self, connection: Any, table_name: str,
                          schema: Optional[str] = None, **kw: Any) -> dict:
        return {"constrained_columns": [], "name": None}

    def _nothing(self, connection: Any, table_name: str, schema: Optional[str] = None,
                 **kw: Any) -> list:
        return []

    get_foreign_keys = get_indexes = get_unique_constraints = get_check_constraints = _nothing

    def get_table_comment(self, connection: Any, table_name: str,
                          schema: Optional[str] = None, **kw: Any) -> dict:
        return {"text": None}


dialect = JmDialect
