"""jm cluster add-peer / remove-peer, and the drain deadline: the cluster's membership from
the command line (POST and DELETE /cluster/peers)."""
from __future__ import annotations

import argparse
import re
from typing import Any, Optional

from jm.client.cli_http import EXIT_OK, CliError, Client, UsageError, quote_id, out, print_json
from jm.client.cli_ops import poll_until

_UNITS = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_seconds(text: str, what: str = "--deadline") -> float:
    """'90', '90s', '5m', '1h', '500ms' -> seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", text or "")
    if m is None or m.group(2) not in ("", *_UNITS):
        raise UsageError(f"{what}: {text!r} is not a duration like 90s, 5m or 1h")
    return float(m.group(1)) * _UNITS.get(m.group(2), 1.0)


def deadline_arg(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--deadline", metavar="D",
                        help=f"{what} (e.g. 90s, 5m; default: they finish where they are)")


def cmd_add_peer(client: Client, a: argparse.Namespace) -> int:
    res = client.request("POST", "/cluster/peers", {"peer": a.arg})
    if a.json:
        print_json(res)
        return EXIT_OK
    if res.get("role") == "non-voter":
        out(f"{res.get('id')} is a non-voting member now (the voters, raft.voters of them: "
            f"{', '.join(res.get('members', []))})")
    else:
        out(f"{res.get('id')} is a Raft voter now (voters: "
            f"{', '.join(res.get('members', []))})")
    out(f"start it on its host: {res.get('next')}")
    return EXIT_OK


def cmd_remove_peer(client: Client, a: argparse.Namespace) -> int:
    path = f"/cluster/peers/{quote_id(a.arg)}"
    if a.deadline is not None:
        path += f"?deadline={parse_seconds(a.deadline):g}"
    res = client.request("DELETE", path)
    node = res.get("node") or a.arg
    if a.wait:  # until it left the membership and its place among the voters is taken
        def gone() -> Any:
            seen = client.get("/cluster/peers")
            members = [m.get("id") for m in seen.get("members", []) + seen.get("non-voters", [])]
            core = seen.get("voting-core") or {}
            if node in members or not core.get("settled", True):
                return None
            return {"node": node, "state": "REMOVED", "voting-core": core}
        res = poll_until(gone, f"the removal of {node}", a.wait_timeout)
    if a.json:
        print_json(res)
    else:
        jobs = res.get("jobs") or []
        out(f"{node}: {res.get('state')}" + (f", {len(jobs)} job(s) still on it" if jobs
                                             else ""))
        core = res.get("voting-core") or {}
        if core.get("note"):
            out(f"voting core ({len(core.get('voters') or [])} voters): {core['note']}")
    return EXIT_OK


def cluster_action(client: Client, a: argparse.Namespace) -> Optional[int]:
    """`jm cluster ACTION ARG`; None for the plain overview."""
    if a.action is None:
        if a.arg is not None:
            raise UsageError(f"cluster: unexpected argument {a.arg!r}")
        return None
    if a.arg is None:
        what = "HOST:REST-PORT:RAFT-PORT" if a.action == "add-peer" else "NODE"
        raise UsageError(f"cluster {a.action}: missing {what}")
    if a.action == "add-peer":
        return cmd_add_peer(client, a)
    if a.action == "remove-peer":
        return cmd_remove_peer(client, a)
    raise CliError(f"cluster: unknown action {a.action!r}")  # argparse's choices stop it


def add_cluster_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=["add-peer", "remove-peer"],
                        metavar="add-peer|remove-peer",
                        help="add-peer HOST:REST-PORT:RAFT-PORT: make it a Raft member (then "
                             "start it with bin/jobmanager.sh start HOST:REST-PORT:RAFT-PORT); "
                             "remove-peer NODE: drain a live peer and take it out (a dead one "
                             "at once)")
    parser.add_argument("arg", nargs="?", metavar="PEER|NODE")
    deadline_arg(parser, "remove-peer: batch jobs still running after D restart elsewhere")
    parser.add_argument("--wait", action="store_true",
                        help="remove-peer: wait until it has left the Raft membership")
    parser.add_argument("--wait-timeout", type=float, metavar="S",
                        help="give up waiting after S seconds (default: no limit)")
