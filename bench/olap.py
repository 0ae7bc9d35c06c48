"""Interactive SQL: the SQL gateway against raw Spark Connect clients and against SQL jobs,
on 3 real peers (bin/ scripts) with their embedded Spark Connect servers.

    .venv/bin/python bench/olap.py [--runs 3] [--seconds 10] [--clients 1,4,16]
                                   [--out bench/results/olap.json]

Paths, each with C concurrent clients (threads of this process) for `--seconds`:
* raw: each client holds one Spark Connect session on one of the peers' servers
  (spread), and runs `spark.sql(q).collect()`;
* endpoint: the same through the peers' Spark Connect endpoints (`connect-endpoint` of
  GET /nodes: the authenticated front that passes each session to its engine);
* gateway: each client holds one DB-API connection (a SQL gateway session) through one
  of the peers (spread), and runs `execute(q)` + `fetchall()`;
* dialect: each client holds one SQLAlchemy connection on jm:// and runs
  `execute(text(q)).fetchall()`; pandas: `pandas.read_sql(q, engine)` (a pool of one);
* rest: Flink's REST protocol by a plain client that asks for the first page in the
  statement's answer (`Prefer: return=representation`), the next pages by their URIs;
* jobs: each client submits `{"sql": q}` to `POST /jobs` (spread) and polls its result.
Each query and client count runs the paths in the order given (`--paths raw,gateway,raw`
shows the machine's drift); `ratios` compare each path with raw's median, `paired_ratios`
each path's cell with the raw cells beside it in the same run (as warm as it was; give
`--paths raw,gateway,raw,gateway,raw` for pairs on both sides).
Queries: `SELECT 1` and a small aggregation over 10,000 rows. Reported per cell:
queries/s, p50 and p99 in ms; medians over the runs at the end.

Then the failover phase: C = 16 gateway clients for 3 x heartbeat.timeout; after a
third of it the peer holding the most sessions is SIGKILLed: failed queries (target 0)
and the p99 of that phase (target heartbeat.timeout + 2 s). `--failover-client rest`:
plain REST clients of Flink's protocol (no X-Request-Id) instead of DB-API connections;
`--failover-client flink`: Flink's SQL Client's conversation (bench/olap.py FlinkSqlClient);
`--only-failover`: that phase alone.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import urllib.error

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.common import (BenchCluster, get, median, pct, post, request,  # noqa: E402
                          wait_until)

QUERIES = {
    "select1": "SELECT 1",
    "agg": "SELECT id % 10 AS k, count(*) AS n, sum(id) AS s FROM range(10000) GROUP BY 1",
}
SETTINGS = {"spark.connect.embedded": True, "spark.master": "local[1]",
            "spark.driver.memory": "768m", "heartbeat.timeout": "3 s",
            "jobmanager.slots": 32, "restart-strategy.type": "none",
            "spark.connect.token": "bench-olap"}  # the raw clients show it too


def drive(states: list, seconds: float, run) -> dict:
    """One thread per client state (a long-lived session, opened before the clock
    starts), each calling `run(state)` until the time is up; latencies of the successful
    calls and the failures."""
    clients = len(states)
    lat: list[float] = []
    failures: list[str] = []
    lock = threading.Lock()
    start_gate = threading.Barrier(clients + 1)
    stop_at = [float("inf")]  # set once every worker is at the gate

    def worker(state) -> None:
        start_gate.wait()
        while time.monotonic() < stop_at[0]:
            t0 = time.perf_counter()
            try:
                run(state)
            except Exception as exc:
                with lock:
                    failures.append(f"{type(exc).__name__}: {str(exc)[:200]}")
                continue
            with lock:
                lat.append(time.perf_counter() - t0)
    threads = [threading.Thread(target=worker, args=(st,), daemon=True) for st in states]
    for t in threads:
        t.start()
    start_gate.wait()
    began = time.monotonic()
    stop_at[0] = began + seconds
    for t in threads:
        t.join(seconds + 120)
    took = time.monotonic() - began
    return {"clients": clients, "queries": len(lat), "qps": round(len(lat) / took, 2),
            "p50_ms": round(pct(lat, 50) * 1000, 1), "p99_ms": round(pct(lat, 99) * 1000, 1),
            "failures": len(failures), "failure_examples": failures[:3],
            "failure_all": failures}


def open_all(make, n: int) -> list:
    """The clients' states (their sessions), opened concurrently."""
    states: list = [None] * n

    def one(i: int) -> None:
        states[i] = make(i)
    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    if any(st is None for st in states):
        raise RuntimeError("some clients could not open their sessions")
    return states


def raw_path(remotes: list[str], q: str, opened: list):
    from pyspark.sql import SparkSession

    def make(i: int):
        spark = SparkSession.builder.remote(remotes[i % len(remotes)]).create()
        opened.append(spark.stop)
        return spark
    return make, lambda spark: spark.sql(q).collect()


def gateway_path(urls: list[str], q: str, opened: list):
    from jm.client import dbapi

    def make(i: int):
        order = urls[i % len(urls):] + urls[:i % len(urls)]
        conn = dbapi.connect(order)
        opened.append(conn.close)
        return conn.cursor()

    def run(cur) -> None:
        cur.execute(q)
        cur.fetchall()
    return make, run


def _engine(urls: list[str], i: int, opened: list, **kw):
    """A SQLAlchemy engine on jm:// whose first peer is the i-th (spread)."""
    import sqlalchemy as sa
    hosts = [u.split("://", 1)[1] for u in urls[i % len(urls):] + urls[:i % len(urls)]]
    engine = sa.create_engine(f"jm://{hosts[0]}/?peers={','.join(hosts[1:])}", **kw)
    opened.append(engine.dispose)
    return engine


def dialect_path(urls: list[str], q: str, opened: list):
    """SQLAlchemy's jm:// dialect: one held connection per client, `execute(text(q))`."""
    import sqlalchemy as sa

    def make(i: int):
        conn = _engine(urls, i, opened).connect()
        opened.insert(0, conn.close)
        return conn
    return make, lambda conn: conn.execute(sa.text(q)).fetchall()


def pandas_path(urls: list[str], q: str, opened: list):
    """pandas.read_sql(q, engine) through jm://, an engine (a pool of one) per client."""
    import pandas

    def make(i: int):
        engine = _engine(urls, i, opened, pool_size=1)
        pandas.read_sql("SELECT 1", engine)  # (its pooled connection opened)
        return engine
    return make, lambda engine: pandas.read_sql(q, engine)


def rest_path(urls: list[str], q: str, opened: list):
    """Flink's REST protocol by a plain client asking for the first page in the
    statement's answer (Prefer: return=representation), the next pages by their URIs."""
    def make(i: int):
        client = RestClient(urls[i % len(urls):] + urls[:i % len(urls)], first=True)
        return client
    return make, lambda client: client.run(q)


def jobs_path(urls: list[str], q: str, opened: list):
    def make(i: int):
        return urls[i % len(urls)]

    def run(url: str) -> None:
        jid = post(url + "/jobs", {"sql": q})["jobid"]
        delay = 0.005
        while True:
            res = get(f"{url}/jobs/{jid}/result")
            if res["status"]["id"] == "COMPLETED":
                if res["state"] != "FINISHED":
                    raise RuntimeError(f"job {jid} {res['state']}: {res.get('failure')}")
                return
            time.sleep(delay)
            delay = min(delay * 1.5, 0.05)
    return make, run


PATHS = {"raw": raw_path, "endpoint": raw_path, "gateway": gateway_path,
         "dialect": dialect_path, "pandas": pandas_path, "rest": rest_path, "jobs": jobs_path}


class PeerError(Exception):
    """A request to the peer at `url` got no answer."""

    def __init__(self, url: str, exc: BaseException) -> None:
        super().__init__(f"{url}: {type(exc).__name__}: {exc}")


class RestClient:
    """A plain client of Flink's SQL Gateway REST protocol, as Flink's SQL Client or curl
    speaks it: no X-Request-Id; one peer's address (the next one only when that peer
    refuses the connection: its own death, not the session holder's)."""

    def __init__(self, urls: list[str], first: bool = False) -> None:
        self.urls = urls
        self.headers = {"Prefer": "return=representation"} if first else {}
        self.sh = self._call("POST", "/v1/sessions", {"properties": {}})["sessionHandle"]

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        for _ in range(len(self.urls)):
            try:
                return request(method, self.urls[0] + path, body, timeout=60,
                               headers=self.headers or None)
            except urllib.error.URLError as exc:
                if not isinstance(exc.reason, ConnectionRefusedError):
                    raise PeerError(self.urls[0], exc) from None
                self.urls = self.urls[1:] + self.urls[:1]
            except OSError as exc:  # (its answer lost: the peer it talks to died)
                raise PeerError(self.urls[0], exc) from None
        raise RuntimeError("no peer accepts connections")

    def node(self) -> str:
        return self._call("GET", f"/v1/sessions/{self.sh}")["node"]

    def run(self, q: str) -> list:
        answer = self._call("POST", f"/v1/sessions/{self.sh}/statements",
                            {"statement": q, "executionConfig": {}})
        oh, page = answer["operationHandle"], answer.get("result")  # (asked: the first page)
        uri, rows = f"/v1/sessions/{self.sh}/operations/{oh}/result/0?rowFormat=JSON", []
        while uri:
            if page is None:
                page = self._call("GET", uri)
            if page["resultType"] != "NOT_READY":
                rows += [d["fields"] for d in (page.get("results") or {}).get("data") or []]
            uri = None if page["resultType"] == "EOS" else page.get("nextResultUri")
            page = None
        return rows


class FlinkSqlClient(RestClient):
    """Flink 2.3's SQL Client's conversation (its REST message classes): a v2 session
    with the client's Flink configuration as properties, statements with executionConfig,
    JSON pages to EOS, each operation closed, a heartbeat now and then, and a Flink-style
    SET every tenth statement."""

    CONF = {"execution.runtime-mode": "streaming", "sql-client.execution.result-mode": "table",
            "table.local-time-zone": "default", "parallelism.default": "1",
            "pipeline.name": "Flink SQL Client", "rest.address": "localhost",
            "rest.port": "8081", "execution.target": "remote", "client.timeout": "60 s",
            "table.dml-sync": "false"}

    def __init__(self, urls: list[str]) -> None:
        self.urls, self.count = urls, 0
        self.sh = self._call("POST", "/v2/sessions", {"sessionName": "Flink SQL Client",
                                                      "properties": self.CONF})["sessionHandle"]

    def run(self, q: str) -> list:
        self.count += 1
        if self.count % 10 == 0:
            self._call("POST", f"/v2/sessions/{self.sh}/heartbeat")
            self._statement(f"SET 'table.exec.state.ttl' = '{self.count} ms'")
        return self._statement(q)

    def _statement(self, q: str) -> list:
        oh = self._call("POST", f"/v2/sessions/{self.sh}/statements",
                        {"statement": q, "executionConfig": {}, "executionTimeout": 0}
                        )["operationHandle"]
        uri, rows = f"/v2/sessions/{self.sh}/operations/{oh}/result/0?rowFormat=JSON", []
        while uri:
            page = self._call("GET", uri)
            rows += [d["fields"] for d in (page.get("results") or {}).get("data") or []]
            uri = None if page["resultType"] == "EOS" else page.get("nextResultUri")
        self._call("DELETE", f"/v2/sessions/{self.sh}/operations/{oh}/close")
        return rows


def failover(c: BenchCluster, seconds: float, q: str, client: str = "dbapi") -> dict:
    """16 clients (`dbapi`: DB-API connections, which send request ids; `rest`: plain
    REST clients, which do not; `flink`: Flink's SQL Client's conversation, no request
    ids either) for `seconds`; after a third of it the peer holding most of their
    sessions is SIGKILLed."""
    from jm.client import dbapi
    clients: list = []
    lock = threading.Lock()

    def make(i: int):
        order = c.urls[i % 3:] + c.urls[:i % 3]
        one = dbapi.connect(order) if client == "dbapi" else \
            (FlinkSqlClient if client == "flink" else RestClient)(order)
        with lock:
            clients.append(one)
        return one.cursor() if client == "dbapi" else one

    def run(state) -> None:
        if client == "dbapi":
            state.execute(q)
            state.fetchall()
        else:
            state.run(q)
    result: dict = {}

    def killer() -> None:
        time.sleep(seconds / 3)
        nodes = [x._session.info()["node"] if client == "dbapi" else x.node()
                 for x in list(clients)]
        victim = max(set(nodes), key=nodes.count)
        i = next(k for k, line in enumerate(c.lines) if line.endswith(":" + victim.split(":")[1]))
        os.kill(_peer_pid(c, i), signal.SIGKILL)
        result.update(victim=victim, victim_url=c.urls[i],
                      sessions_on_victim=nodes.count(victim),
                      sessions=len(nodes), killed_at_s=round(seconds / 3, 1), client=client)
    states = open_all(make, 16)
    drive(states, 2.0, run)  # every session's Spark session is open before the kill
    k = threading.Thread(target=killer, daemon=True)
    k.start()
    out = drive(states, seconds, run)
    k.join(30)
    out.update(result)
    # a client whose own peer died loses what it had sent there: that is not the
    # gateway's to hide (a client with several addresses sends its next one elsewhere)
    victim_url = result.get("victim_url")
    own = [f for f in out.pop("failure_all") if victim_url and f.startswith(
        f"PeerError: {victim_url}:")]
    out["failures_at_own_peer"] = len(own)
    return out


def _peer_pid(c: BenchCluster, i: int) -> int:
    host, rest, _ = c.lines[i].split(":")
    run = os.path.join(c.base, "run")
    name = next(n for n in os.listdir(run) if n.endswith(f"-{host}_{rest}.pid"))
    return int(open(os.path.join(run, name)).read())


def one_run(seconds: float, clients: list[int], fo_client: str = "dbapi",
            only_failover: bool = False, paths: tuple = ("raw", "gateway", "jobs"),
            queries: tuple = tuple(QUERIES), warmup: float = 0.0) -> dict:
    out: dict = {"cells": []}
    with BenchCluster(3, SETTINGS) as c:
        for url in c.urls:
            wait_until(lambda u=url: get(u + "/healthz").get("spark-ready"), 300,
                       f"{url} Spark ready")
        remotes = [get(u + "/healthz")["spark-remote"] + "/;token=bench-olap" for u in c.urls]
        endpoints = [n["connect-endpoint"] for n in get(c.urls[0] + "/nodes")["nodes"]]
        if not only_failover:  # the JVMs' JIT first: else the first cells run colder
            for q in (QUERIES[n] for n in queries):
                for build, target in ((raw_path, remotes), (gateway_path, c.urls)):
                    opened = []
                    make, run = build(target, q, opened)
                    drive(open_all(make, 4), warmup / 4, run)
                    for close in opened:
                        close()
        for name, q in [(n, q) for n, q in QUERIES.items()
                        if n in queries and not only_failover]:
            for n in clients:
                for path in paths:  # in the order given (raw,gateway,raw: the drift)
                    build = PATHS[path]
                    target = {"raw": remotes, "endpoint": endpoints}.get(path, c.urls)
                    opened: list = []
                    make, run = build(target, q, opened)
                    states = open_all(make, n)  # long-lived sessions, as raw clients hold
                    drive(states, min(2.0, seconds), run)  # warm-up
                    cell = dict(drive(states, seconds, run), path=path, query=name)
                    cell.pop("failure_all")
                    for close in opened:
                        try:
                            close()
                        except Exception:
                            pass
                    print(json.dumps(cell), flush=True)
                    out["cells"].append(cell)
        out["failover"] = failover(c, 3 * 3.0 + 6, QUERIES["select1"], fo_client)
        print(json.dumps({"failover": out["failover"]}), flush=True)
    return out


def paired_ratios(runs: list[dict]) -> list[dict]:
    """Each path's cell against the raw cells next to it in the same run (the mean of the
    nearest raw cell before and the nearest after, or the one there is): the JVMs keep
    getting faster during a run, so a cell is compared with raw as warm as it was. The
    median over the runs' cells of qps / raw's qps and of p50 - raw's p50."""
    pairs: dict[tuple, list[tuple[float, float]]] = {}
    for run in runs:
        seq: dict[tuple, list[dict]] = {}
        for cell in run["cells"]:
            seq.setdefault((cell["query"], cell["clients"]), []).append(cell)
        for (query, n), cells in seq.items():
            for i, cell in enumerate(cells):
                if cell["path"] == "raw":
                    continue
                near = [next((c for c in reversed(cells[:i]) if c["path"] == "raw"), None),
                        next((c for c in cells[i + 1:] if c["path"] == "raw"), None)]
                near = [c for c in near if c is not None]
                if not near:
                    continue
                qps = sum(c["qps"] for c in near) / len(near)
                p50 = sum(c["p50_ms"] for c in near) / len(near)
                pairs.setdefault((cell["path"], query, n), []).append(
                    (cell["qps"] / qps if qps else 0.0, cell["p50_ms"] - p50))
    return [{"path": path, "query": query, "clients": n, "cells": len(v),
             "qps_vs_raw": round(median([r for r, _ in v]), 2),
             "p50_ms_over_raw": round(median([d for _, d in v]), 1)}
            for (path, query, n), v in pairs.items()]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--clients", default="1,4,16")
    ap.add_argument("--out", default=None)
    ap.add_argument("--failover-client", choices=("dbapi", "rest", "flink"), default="dbapi",
                    help="the failover phase's clients: DB-API connections (request ids), "
                         "plain REST clients of Flink's protocol (none), or Flink's SQL "
                         "Client's whole conversation (none)")
    ap.add_argument("--only-failover", action="store_true")
    ap.add_argument("--warmup", type=float, default=0.0,
                    help="seconds of raw and gateway queries (each query, 4 clients) before "
                         "the first cell: the Spark JVMs' JIT warms up meanwhile")
    ap.add_argument("--paths", default="raw,gateway,jobs",
                    help="which paths to measure, in this order for each query and client "
                         "count (a path may come twice: raw,gateway,dialect,raw)")
    ap.add_argument("--queries", default=",".join(QUERIES), help="which queries to run")
    a = ap.parse_args()
    unknown = set(a.paths.split(",")) - set(PATHS)
    if unknown:
        ap.error(f"unknown paths {', '.join(sorted(unknown))} (of {', '.join(PATHS)})")
    clients = [int(x) for x in a.clients.split(",")]
    runs = [one_run(a.seconds, clients, a.failover_client, a.only_failover,
                    tuple(a.paths.split(",")), tuple(a.queries.split(",")), a.warmup)
            for _ in range(a.runs)]
    summary, seen = [], set()
    for cell in runs[0]["cells"]:
        key = (cell["path"], cell["query"], cell["clients"])
        if key in seen:  # (a path measured twice in a run: raw before and after)
            continue
        seen.add(key)
        same = [c for r in runs for c in r["cells"]
                if (c["path"], c["query"], c["clients"]) == key]
        summary.append({"path": cell["path"], "query": cell["query"], "clients": cell["clients"],
                        "qps": median([c["qps"] for c in same]),
                        "p50_ms": median([c["p50_ms"] for c in same]),
                        "p99_ms": median([c["p99_ms"] for c in same]),
                        "failures": sum(c["failures"] for c in same)})
    raw = {(m["query"], m["clients"]): m for m in summary if m["path"] == "raw"}
    ratios = [{"path": m["path"], "query": m["query"], "clients": m["clients"],
               "qps_vs_raw": round(m["qps"] / base["qps"], 2) if base["qps"] else None,
               "p50_ms_over_raw": round(m["p50_ms"] - base["p50_ms"], 1)}
              for m in summary if m["path"] != "raw"
              for base in [raw.get((m["query"], m["clients"]))] if base]
    paired = paired_ratios(runs)
    fo = [r["failover"] for r in runs]
    report = {"runs": a.runs, "seconds": a.seconds, "medians": summary, "ratios": ratios,
              "paired_ratios": paired,
              "failover": {"failed_queries": [f["failures"] for f in fo],
                           "failed_at_own_peer": [f.get("failures_at_own_peer") for f in fo],
                           "p99_ms": median([f["p99_ms"] for f in fo]),
                           "sessions_on_victim": [f.get("sessions_on_victim") for f in fo],
                           "client": a.failover_client},
              "raw": runs}
    print(json.dumps({"medians": summary, "ratios": ratios, "paired_ratios": paired,
                      "failover": report["failover"]}, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
