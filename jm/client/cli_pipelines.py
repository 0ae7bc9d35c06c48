"""jm pipeline: named pipelines, as GitOps tools apply them (PUT /pipelines/{name}).

  jm pipeline apply clicks.json         # create, keep (unchanged) or upgrade in place
  jm pipeline apply pipelines/          # every *.json file: one pipeline, named by file
  jm pipeline list | status NAME | history NAME | rollback NAME [--to V] | delete NAME
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

from jm.client.cli_http import (EXIT_API, EXIT_OK, CliError, Client, UsageError, quote_id,
                                one_line, out, print_json)

SUFFIXES = (".json",)  # (the client is standard library only: no YAML)
ACTIONS = ("apply", "list", "status", "history", "rollback", "delete")


def read_spec(path: str) -> dict:
    """A pipeline's spec from a JSON file (UsageError naming the file)."""
    try:
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: {one_line(exc, 300)}")
    if not isinstance(spec, dict):
        raise UsageError(f"{path}: a pipeline file holds one job spec (an object)")
    return spec


def files(target: str) -> list[tuple[str, str]]:
    """(name, path) of the pipelines at `target`: a file, or a directory's files."""
    if os.path.isdir(target):
        found = sorted(f for f in os.listdir(target) if f.endswith(SUFFIXES))
        if not found:
            raise UsageError(f"{target}: no *.json file")
        return [(os.path.splitext(f)[0], os.path.join(target, f)) for f in found]
    if not os.path.isfile(target):
        raise UsageError(f"{target}: no such file or directory")
    return [(os.path.splitext(os.path.basename(target))[0], target)]


def _said(res: dict) -> str:
    outcome = res.get("outcome")
    if outcome == "upgrading":
        return (f"upgrading to version {res.get('pending-version')} (version "
                f"{res.get('version')} stops with a savepoint first)")
    return f"{outcome} (version {res.get('version')}, job {res.get('jobid')})"


def apply(client: Client, a: argparse.Namespace) -> int:
    targets = files(a.target)
    if a.name and len(targets) != 1:
        raise UsageError("--name names one pipeline: give one file")
    failed = 0
    for name, path in targets:
        name = a.name or name
        try:
            res = client.request("PUT", f"/pipelines/{quote_id(name)}", read_spec(path))
            if a.wait and res.get("outcome") == "upgrading":
                res = wait_upgraded(client, name, a.wait_timeout)
        except CliError as exc:
            if len(targets) == 1:
                raise
            print(f"jm: {name}: {exc}", file=sys.stderr)
            failed += 1
            continue
        print_json(res) if a.json else out(f"{name}: {_said(res)}")
    return EXIT_API if failed else EXIT_OK


def wait_upgraded(client: Client, name: str, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        p = client.request("GET", f"/pipelines/{quote_id(name)}")
        if p.get("pending-version") is None:
            if p.get("last-error"):
                raise CliError(f"{name}: {p['last-error']}")
            return dict(p, outcome="upgraded")
        if time.monotonic() > deadline:
            raise CliError(f"{name}: still upgrading to version {p['pending-version']} "
                           f"after {timeout:.0f} s")
        time.sleep(0.2)


def rollback(client: Client, a: argparse.Namespace) -> int:
    p = client.request("GET", f"/pipelines/{quote_id(a.name)}")
    versions = {v["version"]: v for v in p.get("versions") or ()}
    want = a.to if a.to is not None else max((v for v in versions if v < p["version"]),
                                              default=None)
    if want is None or want not in versions:
        kept = ", ".join(str(v) for v in sorted(versions))
        raise UsageError(f"{a.name}: no version {want if want is not None else 'before '}"
                         f"{'' if want is not None else p['version']} to roll back to "
                         f"(kept: {kept})")
    res = client.request("PUT", f"/pipelines/{quote_id(a.name)}", versions[want]["spec"])
    if a.wait and res.get("outcome") == "upgrading":
        res = wait_upgraded(client, a.name, a.wait_timeout)
    print_json(res) if a.json else out(f"{a.name}: back to version {want}'s spec: "
                                       f"{_said(res)}")
    return EXIT_OK


def show(client: Client, a: argparse.Namespace) -> int:
    if a.action == "list":
        res: Any = client.request("GET", "/pipelines")
        if a.json:
            print_json(res)
            return EXIT_OK
        out("PIPELINE\tVERSION\tSTATE\tJOB\tPENDING")
        for p in res.get("pipelines") or ():
            out(f"{p['name']}\t{p['version']}\t{p['state']}\t{p['jobid']}\t"
                f"{p.get('pending-version') or '-'}")
        return EXIT_OK
    res = client.request("GET", f"/pipelines/{quote_id(a.name)}")
    if a.json:
        print_json(res)
    elif a.action == "status":
        out(f"{res['name']}: version {res['version']}, job {res['jobid']} {res['state']}"
            + (f", upgrading to version {res['pending-version']}"
               if res.get("pending-version") else "")
            + (f"; {res['last-error']}" if res.get("last-error") else ""))
    else:
        for v in res.get("versions") or ():
            out(f"{v['version']}\t{v['jobid']}\t{v.get('submitter') or '-'}\t"
                f"{v.get('restored-from') or '-'}\t{json.dumps(v['spec'], sort_keys=True)}")
    return EXIT_OK


def cmd_pipeline(client: Client, a: argparse.Namespace) -> int:
    if a.action != "list" and not a.target:
        raise UsageError(f"pipeline {a.action}: missing "
                         f"{'FILE|DIR' if a.action == 'apply' else 'NAME'}")
    if a.action == "apply":
        return apply(client, a)
    a.name = a.target
    if a.action == "rollback":
        return rollback(client, a)
    if a.action == "delete":
        res = client.request("DELETE", f"/pipelines/{quote_id(a.name)}")
        print_json(res) if a.json else out(f"{a.name}: deleted (job {res.get('jobid')} "
                                           f"{res.get('state')})")
        return EXIT_OK
    return show(client, a)


def add_pipeline(add) -> None:
    p = add("pipeline", "named pipelines: apply FILE|DIR (create, keep or upgrade in place "
                        "with a savepoint), list, status, history, rollback, delete",
            cmd_pipeline)
    p.add_argument("action", choices=ACTIONS, metavar="ACTION", help=", ".join(ACTIONS))
    p.add_argument("target", nargs="?", metavar="NAME|FILE|DIR")
    p.add_argument("--name", help="apply: the pipeline's name (default: the file's)")
    p.add_argument("--to", type=int, metavar="V", help="rollback: this version (default: "
                                                      "the one before the current)")
    p.add_argument("--wait", action="store_true", help="apply, rollback: until an upgrade "
                                                       "has started the new version")
    p.add_argument("--wait-timeout", type=float, default=300.0, metavar="S")

