"""jm token create / list / revoke: named credentials (POST, GET /tokens, DELETE
/tokens/{name}; admin). The secret is printed once, at its creation."""
from __future__ import annotations

import argparse

from jm.client.cli_http import EXIT_OK, Client, UsageError, quote_id, out, print_json

ACTIONS = ("create", "list", "revoke")


def cmd_token(client: Client, a: argparse.Namespace) -> int:
    if a.action != "list" and not a.name:
        raise UsageError(f"token {a.action}: missing NAME")
    if a.action == "list":
        res = client.request("GET", "/tokens")
        if a.json:
            print_json(res)
            return EXIT_OK
        for t in res.get("tokens") or ():
            out(f"{t.get('name')}\t{t.get('role')}\t{t.get('tenant') or '*'}")
        return EXIT_OK
    if a.action == "revoke":
        res = client.request("DELETE", f"/tokens/{quote_id(a.name)}")
        print_json(res) if a.json else out(f"{a.name}: revoked")
        return EXIT_OK
    if a.role is None:
        raise UsageError("token create: --role read|submit|admin is required")
    res = client.request("POST", "/tokens", {"name": a.name, "role": a.role,
                                             "tenant": a.tenant})
    if a.json:
        print_json(res)
    else:  # the secret alone (TOKEN=$(jm token create ...))
        out(res.get("token"))
    return EXIT_OK


def add_token(add) -> None:
    t = add("token", "named credentials: create NAME --role R [--tenant T] (prints the "
                     "secret, once), list, revoke NAME (admin)", cmd_token)
    t.add_argument("action", choices=ACTIONS, metavar="ACTION",
                   help="create, list or revoke")
    t.add_argument("name", nargs="?", metavar="NAME")
    t.add_argument("--role", choices=("read", "submit", "admin"),
                   help="read < submit (jobs, sessions, artifacts) < admin (members, "
                        "drains, tokens)")
    t.add_argument("--tenant", metavar="T", help="the token's tenant (default: every tenant)")
