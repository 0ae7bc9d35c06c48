"""`jm sql`: a SQL shell on the cluster's SQL gateway (any peer), or one-shot statements.

    jm sql                          interactive: statements end with ';' (multi-line),
                                    \\timing toggles timings, \\q quits, Ctrl-C cancels
                                    the running statement (or clears the line)
    jm sql -e "SELECT 1; SELECT 2"  run them and print the results
    jm sql -f queries.sql           the same from a file ('-': standard input)
    --format table|csv|json         how results are printed (table by default)
    --property K=V                  session properties (Spark SQL settings)
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
from typing import Callable, Optional

from jm.client.cli_http import (EXIT_API, EXIT_OK, CliError, Client, UsageError, one_line,
                                out)
from jm.client.sqlsession import Result, SqlSession, StatementFailed, timed
from jm.policy.sql.sqlstmt import complete, split_statements

HISTORY = os.path.expanduser("~/.jm_sql_history")
MAX_TABLE_ROWS = 10000  # a table is printed whole; more rows: use csv or json


def render(result: Result, fmt: str, write: Callable[[str], None]) -> int:
    """Print a result; return how many rows it had."""
    names = result.names
    rows = result.rows()
    count = 0
    if not names:  # a statement without a result (SET x=1, a temporary view...)
        return sum(1 for _ in rows)
    if fmt == "json":
        for row in rows:
            write(json.dumps(dict(zip(names, row))))
            count += 1
        return count
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        if names:
            w.writerow(names)
        for row in rows:
            w.writerow(["" if v is None else v for v in row])
            count += 1
        write(buf.getvalue().rstrip("\n"))
        return count
    data = []
    for row in rows:
        data.append(["NULL" if v is None else one_line(v if isinstance(v, str)
                                                       else json.dumps(v), 120) for v in row])
        if len(data) > MAX_TABLE_ROWS:
            raise CliError(f"more than {MAX_TABLE_ROWS} rows: use --format csv or json")
    count = len(data)
    widths = [max([len(n)] + [len(r[i]) for r in data]) for i, n in enumerate(names)]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    write(line)
    write("| " + " | ".join(n.ljust(w) for n, w in zip(names, widths)) + " |")
    write(line)
    for r in data:
        write("| " + " | ".join(v.ljust(w) for v, w in zip(r, widths)) + " |")
    write(line)
    return count


def run_statement(session: SqlSession, sql: str, fmt: str, timing: bool) -> bool:
    """Run one statement and print its result; False if it failed (message on stderr)."""
    try:
        (result, elapsed) = timed(session.execute, sql)
        count, more = timed(render, result, fmt, out)
    except StatementFailed as exc:
        print(f"ERROR: {exc}", file=sys.stderr, flush=True)
        return False
    if fmt == "table" and (result.is_query or count):
        note = f"{count} row{'s' if count != 1 else ''}"
    elif fmt == "table":
        note = "OK"
    else:
        note = ""
    if timing:
        note = (note + " " if note else "") + f"({(elapsed + more) * 1000:.0f} ms)"
    if note:
        print(note, file=sys.stderr if fmt != "table" else sys.stdout, flush=True)
    return True


def run_script(session: SqlSession, text: str, fmt: str, timing: bool) -> int:
    statements = split_statements(text)
    if not statements:
        raise UsageError("no SQL statement given")
    for sql in statements:
        if not run_statement(session, sql, fmt, timing):
            return EXIT_API
    return EXIT_OK


def shell(session: SqlSession, fmt: str, timing: bool) -> int:
    try:
        import readline
        try:
            readline.read_history_file(HISTORY)
        except OSError:
            pass
    except ImportError:  # no readline: plain input()
        readline = None  # type: ignore[assignment]
    node = session.info().get("node")
    out(f"jm sql: session {session.handle} on {node}; end statements with ';', "
        "\\timing toggles timings, \\q quits")
    buffer = ""
    try:
        while True:
            try:
                line = input("jm> " if not buffer else "  > ")
            except EOFError:
                out("")
                return EXIT_OK
            except KeyboardInterrupt:
                out("")
                buffer = ""
                continue
            cmd = line.strip()
            if not buffer and cmd in ("\\q", "quit", "exit", "\\quit"):
                return EXIT_OK
            if not buffer and cmd == "\\timing":
                timing = not timing
                out(f"timing is {'on' if timing else 'off'}")
                continue
            buffer = f"{buffer}\n{line}" if buffer else line
            if not complete(buffer):
                continue
            text, buffer = buffer, ""
            for sql in split_statements(text):
                try:
                    run_statement(session, sql, fmt, timing)
                except KeyboardInterrupt:
                    session.cancel()
                    print("cancelled", file=sys.stderr, flush=True)
                    break
    finally:
        if readline is not None:
            try:
                readline.write_history_file(HISTORY)
            except OSError:
                pass


def cmd_sql(client: Client, a: argparse.Namespace) -> int:
    props = {}
    for pair in a.property or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--property takes KEY=VALUE, not {pair!r}")
        props[key.strip()] = value
    if a.execute is not None and a.file is not None:
        raise UsageError("give -e or -f, not both")
    text: Optional[str] = a.execute
    if a.file is not None:
        try:
            text = sys.stdin.read() if a.file == "-" else open(a.file).read()
        except OSError as exc:
            raise UsageError(f"cannot read {a.file}: {exc.strerror or exc}")
    session = SqlSession(client, props, name=a.name or "")
    try:
        if text is not None:
            return run_script(session, text, a.format, a.timing)
        return shell(session, a.format, a.timing)
    finally:
        try:
            session.close()
        except CliError:
            pass


def add_sql(add: Callable[..., argparse.ArgumentParser]) -> None:
    p = add("sql", "run SQL on the cluster's SQL gateway (a shell, or -e / -f)", cmd_sql)
    p.add_argument("-e", "--execute", metavar="SQL", help="statements to run (';' between)")
    p.add_argument("-f", "--file", metavar="FILE", help="a file of statements ('-': stdin)")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table",
                   help="how results are printed (default: table)")
    p.add_argument("--property", action="append", metavar="K=V",
                   help="a session property (a Spark SQL setting); repeatable")
    p.add_argument("--name", help="the session's name")
    p.add_argument("--timing", action="store_true", help="print each statement's time")
