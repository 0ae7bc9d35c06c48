"""Cost of classifying a SQL statement (issue 30, item 5): the server's classifier with
a Spark SQL parser (jm/policy/sql/sqlparse.py, sqlglot) against the keyword rules it falls
back to (jm/policy/sql/sqlstmt.py) and, when git can show it, the keyword classifier before
issue 30 (HEAD's sqlstmt.py, or --old-rev). Per statement, over a mix of 20 typical
statements, `--rounds` rounds (each round every statement once, in order): p50, p99 and
mean in microseconds; then a few long texts (an INSERT ... VALUES of 1, 16 and 64 KB),
the time per text in milliseconds, which sets sqlgateway.CLASSIFY_INLINE (classified on
the event loop below it) and sqlparse.PARSE_MAX (parsed below it, keywords above).

    .venv/bin/python bench/sqlparse.py [--rounds 1000] [--old-rev HEAD]

Prints one JSON object.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import types

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from jm.policy.sql import sqlparse, sqlstmt  # noqa: E402

MIX = [
    "SELECT 1",
    "SELECT id, name, amount FROM sales WHERE day = '2026-11-26' ORDER BY amount DESC LIMIT 10",
    "select c.region, sum(o.total) as t from orders o join customers c on o.cid = c.id "
    "group by c.region having sum(o.total) > 1000",
    "WITH recent AS (SELECT * FROM events WHERE ts > current_date() - INTERVAL 1 DAY) "
    "SELECT kind, count(*) FROM recent GROUP BY kind",
    "-- the daily totals\nSELECT day, count(*) FROM `raw`.`events` GROUP BY day",
    "SHOW TABLES",
    "DESCRIBE TABLE EXTENDED sales",
    "EXPLAIN SELECT * FROM sales WHERE amount > 10",
    "SET 'execution.runtime-mode' = 'batch'",
    "SET spark.sql.shuffle.partitions = 8",
    "RESET",
    "USE analytics",
    "CREATE OR REPLACE TEMP VIEW big_sales AS SELECT * FROM sales WHERE amount > 100",
    "CACHE TABLE hot AS SELECT * FROM sales WHERE day = current_date()",
    "DROP VIEW big_sales",
    "CREATE TABLE sales_copy USING parquet AS SELECT * FROM sales",
    "INSERT OVERWRITE TABLE daily PARTITION (day = '2026-11-26') "
    "SELECT id, amount FROM sales WHERE day = '2026-11-26'",
    "WITH s AS (SELECT id, sum(amount) AS a FROM sales GROUP BY id) "
    "INSERT INTO totals SELECT * FROM s",
    "MERGE INTO target t USING updates u ON t.id = u.id "
    "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
    "/* nightly */ INSERT INTO audit VALUES (1, 'x', current_timestamp())",
]
VIEWS = {"big_sales", "hot"}


def old_classifier(rev: str):
    """The classify of sqlstmt.py at `rev`, or None."""
    try:
        src = subprocess.run(["git", "-C", ROOT, "show", f"{rev}:jm/policy/sql/sqlstmt.py"],
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    mod = types.ModuleType("sqlstmt_old")
    exec(compile(src, "sqlstmt_old.py", "exec"), mod.__dict__)
    return mod.classify


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def per_statement(fn, rounds: int) -> dict:
    for s in MIX:
        fn(s, VIEWS)  # warm up
    times = []
    clock = time.perf_counter_ns
    for _ in range(rounds):
        for s in MIX:
            t0 = clock()
            fn(s, VIEWS)
            times.append((clock() - t0) / 1000)
    return {"p50_us": round(pct(times, 50), 1), "p99_us": round(pct(times, 99), 1),
            "mean_us": round(sum(times) / len(times), 1), "n": len(times)}


def long_texts(fn, sizes=(1, 16, 64)) -> dict:
    out = {}
    for kb in sizes:
        row = "(12345, 'some text here', 3.25), "
        text = "INSERT INTO t VALUES " + row * (kb * 1024 // len(row))
        text = text.rstrip(", ")
        best = min(_once(fn, text) for _ in range(3))
        out[f"{kb}kb_ms"] = round(best * 1000, 2)
    return out


def _once(fn, text: str) -> float:
    t0 = time.perf_counter()
    fn(text, VIEWS)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--old-rev", default="HEAD")
    a = ap.parse_args()
    import sqlglot
    kinds = {s: (sqlparse.classify(s, VIEWS), sqlstmt.classify(s, VIEWS)) for s in MIX}
    res = {"statements": len(MIX), "rounds": a.rounds, "sqlglot": sqlglot.__version__,
           "python": sys.version.split()[0],
           "kinds_differ": [s for s, (n, k) in kinds.items() if n != k],
           "new_sqlglot": per_statement(sqlparse.classify, a.rounds),
           "keywords": per_statement(sqlstmt.classify, a.rounds)}
    old = old_classifier(a.old_rev)
    if old is not None:
        res[f"old_{a.old_rev}"] = per_statement(old, a.rounds)
    # long texts: the parser below PARSE_MAX, and what parsing 64 KB would cost
    keep = sqlparse.PARSE_MAX
    res["long_new"] = long_texts(sqlparse.classify)
    sqlparse.PARSE_MAX = 10 ** 9
    try:
        res["long_parsed_anyway"] = long_texts(sqlparse.classify, (64, 256))
    finally:
        sqlparse.PARSE_MAX = keep
    res["long_keywords"] = long_texts(sqlstmt.classify, (1, 16, 64, 256))
    res["parse_max"] = keep
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
