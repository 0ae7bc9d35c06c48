"""bin/rolling-restart.sh: restart every member of a running cluster, one at a time, the
Raft leader last, without restarting a streaming job:

    drain (streaming jobs move with savepoints; batch jobs finish, or after --deadline
    run again elsewhere) -> stop -> start -> wait until it is back -> undrain

Peers on other hosts are stopped and started over ssh by bin/cluster.sh (env.ssh.opts).
A stopping leader hands leadership over at once, so submissions go on throughout.

    python -m jm.local.rolling --conf-dir conf [--deadline 10m] [--step-timeout 600]
                               [-D key=value ...]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Optional

from jm.config import ConfigError, load_config, parse_duration, parse_overrides, read_masters

BIN = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "bin")


class RollingError(Exception):
    pass


class Cluster:
    """The REST API of whichever peer answers (the one being restarted does not)."""

    def __init__(self, urls: list[str], token: Optional[str], scheme: str = "http",
                 ssl_context: Any = None) -> None:
        self.urls = urls
        self.scheme = scheme
        self.ssl_context = ssl_context  # rest.ssl.ca: how the peers' certificates are checked
        self.headers = {"Content-Type": "application/json"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"

    def call(self, method: str, path: str, body: Any = None, avoid: str = "") -> Any:
        errors = []
        for url in self.urls:
            if avoid and url == avoid:
                continue
            data = json.dumps(body).encode() if body is not None else None
            req = urllib.request.Request(url + path, data=data, method=method,
                                         headers=self.headers)
            try:
                with urllib.request.urlopen(req, timeout=10, context=self.ssl_context) as resp:
                    return json.loads(resp.read() or b"{}")
            except urllib.error.HTTPError as exc:
                try:
                    detail = "; ".join(json.loads(exc.read()).get("errors", []))
                except ValueError:
                    detail = str(exc)
                if exc.code == 503:  # no leader this instant, or not applied yet: next
                    errors.append(f"{url}: {detail}")
                    continue
                raise RollingError(f"{method} {path}: {exc.code} {detail}") from None
            except (urllib.error.URLError, OSError, ValueError) as exc:
                errors.append(f"{url}: {exc}")
        raise RollingError(f"no peer answered {method} {path}: {'; '.join(errors)}")

    def nodes(self, avoid: str = "") -> dict[str, dict]:
        return {n["id"]: n for n in self.call("GET", "/nodes", avoid=avoid)["nodes"]}


def wait(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            out = check()
        except RollingError:
            out = None  # a peer between answers: try again
        if out:
            return out
        if time.monotonic() > deadline:
            raise RollingError(f"{what}: not within {timeout:g} s")
        time.sleep(0.5)


def say(text: str) -> None:
    print(f"rolling-restart: {text}", flush=True)


def restart(cluster: Cluster, node: dict, args: argparse.Namespace, env: dict) -> None:
    nid, line = node["id"], f"{node['host']}:{node['rest-port']}:{node['raft-port']}"
    url = f"{cluster.scheme}://{node['host']}:{node['rest-port']}"
    say(f"{nid}: draining" + (" (the leader)" if node["raft-role"] == "leader" else ""))
    body = {"deadline": args.deadline} if args.deadline is not None else None
    cluster.call("POST", f"/nodes/{nid}/drain", body)
    wait(f"the drain of {nid}",
         lambda: cluster.nodes()[nid]["state"] in ("DRAINED", "DEAD"), args.step_timeout)
    for action in ("stop", "start"):
        say(f"{nid}: {action}")
        r = subprocess.run([os.path.join(BIN, "cluster.sh"), action, *args.D],
                           env=dict(env, JM_PEERS=line), capture_output=True, text=True,
                           timeout=args.step_timeout)
        if r.returncode != 0:
            raise RollingError(f"{action} of {line} failed: "
                               f"{(r.stderr or r.stdout).strip()}")
    back = wait(f"{nid} to register again",
                lambda: (lambda n: n if n and n["pid"] not in (None, node["pid"])
                         and n["state"] in ("ALIVE", "DRAINED") else None)(
                    cluster.nodes(avoid=url).get(nid)), args.step_timeout)
    cluster.call("DELETE", f"/nodes/{nid}/drain")
    say(f"{nid}: back (pid {back['pid']}), takes work again")


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="rolling-restart.sh",
                                 description="Restart every member, the Raft leader last.")
    ap.add_argument("--conf-dir", default=os.environ.get("JM_CONF_DIR", "conf"))
    ap.add_argument("--deadline", help="batch jobs still running on a draining peer after "
                                       "this (e.g. 10 min) run again elsewhere")
    ap.add_argument("--step-timeout", default="10 min",
                    help="give up when a drain, stop or start takes longer (default 10 min)")
    ap.add_argument("-D", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    try:
        conf = load_config(args.conf_dir, parse_overrides(args.D),
                           home=os.environ.get("JM_HOME"))
        masters = read_masters(os.path.join(args.conf_dir, "masters"))
        args.deadline = None if args.deadline is None else parse_duration(args.deadline)
        args.step_timeout = parse_duration(args.step_timeout)
    except ConfigError as exc:
        print(f"rolling-restart: {exc}", file=sys.stderr)
        return 2
    args.D = [a for kv in args.D for a in ("-D", kv)]
    env = dict(os.environ, JM_CONF_DIR=os.path.abspath(args.conf_dir))
    from jm.cluster import tls
    ctx = tls.client_context(conf)
    cluster = Cluster([m.url(tls.scheme(conf)) for m in masters], conf.rest_token(),
                      tls.scheme(conf), ctx if ctx is not True else None)
    done: set[str] = set()
    try:
        while True:
            nodes = cluster.nodes()
            for n in nodes.values():  # members added online are reached through them too
                url = f"{cluster.scheme}://{n['host']}:{n['rest-port']}"
                if n.get("rest-port") and url not in cluster.urls:
                    cluster.urls.append(url)
            todo = [n for n in nodes.values() if n["id"] not in done and n["raft-role"]
                    and n["state"] not in ("DEAD", "JOINING", "LEAVING")]
            if not todo:
                break
            # followers first; the leader when it is the last one left
            todo.sort(key=lambda n: (n["raft-role"] == "leader", n["id"]))
            restart(cluster, todo[0], args, env)
            done.add(todo[0]["id"])
    except (RollingError, subprocess.TimeoutExpired) as exc:
        print(f"rolling-restart: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("rolling-restart: interrupted", file=sys.stderr)
        return 130
    say(f"done: {len(done)} peer(s) restarted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
