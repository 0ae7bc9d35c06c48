"""`jm list`: the jobs, newest first, a page at a time (GET /jobs, filtered there)."""
from __future__ import annotations

import argparse
import urllib.parse
from typing import Callable

from jm.client.cli_http import EXIT_OK, Client, fmt_duration, out, print_json, table


def cmd_list(client: Client, a: argparse.Namespace) -> int:
    """A page of jobs, newest first, from GET /jobs (filtered there); --all walks every
    page. The table shows a page oldest first, and says where the next page starts."""
    params = {"limit": a.limit, "offset": a.offset, "state": a.state, "name": a.name,
              "node": a.node}
    jobs, total, nxt = [], 0, None
    while True:
        query = urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        res = client.get(f"/jobs?{query}")
        jobs += res.get("jobs", [])
        total, nxt = res.get("total", len(jobs)), res.get("next-offset")
        if not a.all or nxt is None:
            break
        params["offset"] = nxt
    if a.json:
        print_json({"jobs": jobs, "total": total, "next-offset": nxt})
        return EXIT_OK
    if not jobs:
        out("no jobs")
        return EXIT_OK
    jobs.sort(key=lambda j: (j.get("start-time") or 0, j.get("jid") or ""))
    rows = [[j.get("jid"), j.get("name"), j.get("state"), j.get("node"), j.get("attempt"),
             j.get("restarts"), fmt_duration(j.get("duration"))] for j in jobs]
    out(table(["ID", "NAME", "STATE", "NODE", "ATTEMPT", "RESTARTS", "DURATION"], rows))
    if nxt is not None:
        out(f"{len(jobs)} of {total} jobs (the newest); older ones: jm list --offset {nxt}"
            + (f" --limit {a.limit}" if a.limit else ""))
    return EXIT_OK


def add_list(add: Callable[..., argparse.ArgumentParser]) -> None:
    ls = add("list", "list the jobs, newest first, a page at a time", cmd_list)
    ls.add_argument("--state", help="only jobs in these states (comma-separated)")
    ls.add_argument("--name", help="only jobs whose name or id contains this")
    ls.add_argument("--node", help="only jobs on (or last on) this peer")
    ls.add_argument("--limit", type=int, help="jobs per page (default 100, at most 1000)")
    ls.add_argument("--offset", type=int, help="skip this many (newest first)")
    ls.add_argument("--all", action="store_true", help="every page")
