"""The cost of the credential check per request: `GET /jobs/{id}` on 3 real peers with
rest.auth.token set, as the root credential (compared bytes) and as a named read
credential (its SHA-256 looked up in the peer's replica, the route's role from
rest/roles.py), and on a cluster without credentials. Keep-alive connections, one
client; the modes interleaved in rounds; p50 and p99 per mode, medians over rounds.

    .venv/bin/python bench/auth.py [--rounds 5] [--requests 500] [--out FILE]
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.common import ROOT, BenchCluster, median, pct, wait_until  # noqa: E402

JOB = {"entry": "trivial_job:main", "pyfiles": [os.path.join(ROOT, "bench") + "/"]}
SETTINGS = {"spark.connect.embedded": False}


def call(conn: http.client.HTTPConnection, method: str, path: str, token: str = "",
         body: dict | None = None) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    conn.request(method, path, json.dumps(body) if body is not None else None, headers)
    resp = conn.getresponse()
    return resp.status, json.loads(resp.read() or b"{}")


def prepare(c: BenchCluster, root: str) -> tuple[http.client.HTTPConnection, str, str]:
    """A keep-alive connection to peer 0, a finished job's id, a named read credential."""
    conn = http.client.HTTPConnection(c.urls[0].split("//")[1], timeout=30)
    s, b = call(conn, "POST", "/jobs", root, JOB)
    assert s == 202, b
    jid = b["jobid"]
    wait_until(lambda: call(conn, "GET", f"/jobs/{jid}", root)[1].get("state") == "FINISHED",
               60, "the job finished")
    named = ""
    if root:
        s, b = call(conn, "POST", "/tokens", root, {"name": "bench-reader", "role": "read"})
        assert s == 201, b
        named = b["token"]
    return conn, jid, named


def measure(conn: http.client.HTTPConnection, jid: str, token: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        s, _ = call(conn, "GET", f"/jobs/{jid}", token)
        out.append((time.perf_counter() - t0) * 1000)
        assert s == 200, s
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    root = "bench-root-token"
    rounds: dict = {"none": [], "root": [], "named": []}
    with BenchCluster(3, dict(SETTINGS, **{"rest.auth.token": root})) as auth, \
            BenchCluster(3, SETTINGS) as plain:
        conn, jid, named = prepare(auth, root)
        plain_conn, plain_jid, _ = prepare(plain, "")
        for _ in range(a.rounds):
            for mode, (cn, j, tok) in (("none", (plain_conn, plain_jid, "")),
                                       ("root", (conn, jid, root)),
                                       ("named", (conn, jid, named))):
                ms = measure(cn, j, tok, a.requests)
                rounds[mode].append({"p50_ms": pct(ms, 50), "p99_ms": pct(ms, 99)})
                print(json.dumps({"mode": mode, **rounds[mode][-1]}), flush=True)
    summary = {m: {"p50_ms": round(median([r["p50_ms"] for r in rs]), 3),
                   "p99_ms": round(median([r["p99_ms"] for r in rs]), 3)}
               for m, rs in rounds.items()}
    print(json.dumps(summary, indent=1))
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"requests": a.requests, "summary": summary, "rounds": rounds}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
