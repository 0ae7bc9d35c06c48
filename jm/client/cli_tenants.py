"""jm tenant set / list: tenants' quotas (PUT, GET /tenants); jm sessions: every open
session with its tenant (GET /cluster/sessions); jm audit: the cluster's audit log, every
live peer's entries merged (GET /audit, admin)."""
from __future__ import annotations

import argparse
import sys

from jm.client.cli_http import (EXIT_OK, Client, UsageError, fmt_time, quote_id, out,
                                print_json, table)


def _quota(n: object) -> str:
    return str(n) if n else "-"


def cmd_tenant(client: Client, a: argparse.Namespace) -> int:
    if a.action == "list":
        res = client.request("GET", "/tenants")
        if a.json:
            print_json(res)
            return EXIT_OK
        out("TENANT\tSLOTS\tUSED\tSESSIONS\tOPEN\tOVER-QUOTA\tOS-USER")
        for t in res.get("tenants") or ():
            out(f"{t.get('name')}\t{_quota(t.get('slots'))}\t{t.get('slots-used')}\t"
                f"{_quota(t.get('sessions'))}\t{t.get('sessions-open')}\t"
                f"{t.get('jobs-over-quota')}\t{t.get('os-user') or '-'}")
        return EXIT_OK
    if not a.name:
        raise UsageError("tenant set: missing TENANT")
    proxies, dirs = (None if raw is None else [x.strip() for x in raw.split(",") if x.strip()]
                     for raw in (a.proxy_users, a.savepoint_dirs))
    body = {k: v for k, v in (("slots", a.slots), ("sessions", a.sessions),
                              ("os-user", a.os_user), ("memory", a.memory), ("cpu", a.cpu),
                              ("proxy-users", proxies), ("savepoint-dirs", dirs))
            if v is not None}
    if not body:
        raise UsageError("tenant set: give --slots N, --sessions M (0: no limit), "
                         "--os-user USER ('' for none), --memory SIZE, --cpu WEIGHT, "
                         "--proxy-users U1,U2 and/or --savepoint-dirs D1,D2 ('' for none)")
    res = client.request("PUT", f"/tenants/{quote_id(a.name)}", body)
    if a.json:
        print_json(res)
    else:
        out(f"{res.get('name')}: slots {_quota(res.get('slots'))} "
            f"({res.get('slots-used')} used), sessions {_quota(res.get('sessions'))} "
            f"({res.get('sessions-open')} open)"
            + (f", runs as {res['os-user']}" if res.get("os-user") else "")
            + (f", engines of {res['memory']} bytes" if res.get("memory") else "")
            + (f", CPU weight {res['cpu']}" if res.get("cpu") else "")
            + (f", proxy users {', '.join(res['proxy-users'])}" if res.get("proxy-users")
               else "")
            + (f", savepoints also in {', '.join(res['savepoint-dirs'])}"
               if res.get("savepoint-dirs") else ""))
    return EXIT_OK


def cmd_audit(client: Client, a: argparse.Namespace) -> int:
    query = "&".join(f"{k}={quote_id(str(v))}" for k, v in (("limit", a.limit), ("job", a.job),
                                                            ("who", a.who)) if v)
    res = client.request("GET", "/audit" + (f"?{query}" if query else ""))
    if a.json:
        print_json(res)
        return EXIT_OK
    for e in res.get("entries") or ():
        what = e.get("job") or ""
        out(f"{e.get('time')}\t{e.get('peer')}\t{e.get('who')}\t{e.get('method')} "
            f"{e.get('path')}\t{e.get('status')}\t{what}")
    missing = res.get("unreachable") or ()
    if missing:
        print(f"jm: no entries from {', '.join(map(str, missing))}: did not answer",
              file=sys.stderr)
    return EXIT_OK


def cmd_sessions(client: Client, a: argparse.Namespace) -> int:
    query = f"?kind={quote_id(a.kind)}" if a.kind else ""
    res = client.request("GET", "/cluster/sessions" + query)
    if a.json:
        print_json(res)
        return EXIT_OK
    rows = [[s.get("kind"), s.get("id"), s.get("tenant") or "default",
             s.get("submitter") or "-", s.get("node") or "-", fmt_time(s.get("created")),
             s.get("endpoint") or s.get("name") or "-"] for s in res.get("sessions") or ()]
    out(table(["KIND", "ID", "TENANT", "BY", "PEER", "OPENED", "ENDPOINT/NAME"], rows))
    return EXIT_OK


def add_tenant(add) -> None:
    t = add("tenant", "tenants' quotas: set TENANT [--slots N] [--sessions M] (0: no "
                      "limit; admin), list", cmd_tenant)
    t.add_argument("action", choices=("set", "list"), metavar="ACTION", help="set or list")
    t.add_argument("name", nargs="?", metavar="TENANT")
    t.add_argument("--slots", type=int, metavar="N",
                   help="slots its jobs may hold at once; more wait CREATED")
    t.add_argument("--sessions", type=int, metavar="M",
                   help="SQL, Livy and Spark Connect sessions it may hold open; more are "
                        "refused (429; Connect: RESOURCE_EXHAUSTED)")
    t.add_argument("--os-user", metavar="USER",
                   help="the OS user its jobs, engines and Livy code run as on every peer "
                        "(peers run as root); '' for none")
    t.add_argument("--memory", metavar="SIZE",
                   help="memory of each of its engines (their cgroup), e.g. '4 gb'; 0: none")
    t.add_argument("--cpu", type=int, metavar="WEIGHT",
                   help="CPU weight of each of its engines (100: an engine's default share)")
    t.add_argument("--proxy-users", metavar="U1,U2",
                   help="the OS users its jobs and Livy sessions may run as (their "
                        "proxy-user; also in jobmanager.executor.proxy-users); '' for none")
    t.add_argument("--savepoint-dirs", metavar="D1,D2",
                   help="directories (paths or URIs) its savepoints may be written to and "
                        "restored from besides state.savepoints.dir; '' for none")
    se = add("sessions", "every open session (SQL gateway, Livy, Spark Connect) with its "
                         "tenant and peer", cmd_sessions)
    se.add_argument("--kind", choices=("sql", "livy", "connect"), help="only this kind")
    au = add("audit", "the audit log of every live peer: who did what to which job "
                      "(admin)", cmd_audit)
    au.add_argument("--limit", type=int, help="newest entries (default 100)")
    au.add_argument("--job", help="only entries naming this job")
    au.add_argument("--who", help="only this credential's entries")
