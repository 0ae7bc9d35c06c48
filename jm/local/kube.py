"""A peer's pod in a Kubernetes StatefulSet joins and leaves the membership as the
StatefulSet scales (decisions: jm/policy/members/podlife.py; manifests: deploy/kubernetes,
deploy/helm/jobmanager):

    python -m jm.local.kube join --peer HOST:REST:RAFT      # deploy/entrypoint.sh, before start
    python -m jm.local.kube prestop --peer HOST:REST:RAFT   # the container's preStop hook
    python -m jm.local.kube leave --peer HOST:REST:RAFT     # what prestop does when scaled away

`join` adds a pod that is not a member through a seed (conf/masters); `prestop` asks the
cluster to remove a pod the StatefulSet is scaling away (it drains first) and waits until
it is gone, and does nothing for any other pod's end (SIGTERM drains it:
jobmanager.stop.drain-deadline). The StatefulSet's desired replicas come from the
Kubernetes API with the pod's service account (an RBAC Role to get statefulsets).
"""
from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import urllib.request
from typing import Optional

from jm.config import ConfigError, load_config, parse_overrides, parse_peer, read_masters
from jm.local.rolling import Cluster, RollingError, wait
from jm.policy.members.podlife import ADD, gone, how_to_join, ordinal, scaled_away
from jm.policy.members.stopdrain import wait_budget

SA = "/var/run/secrets/kubernetes.io/serviceaccount"


def say(text: str) -> None:
    print(f"jm.local.kube: {text}", file=sys.stderr, flush=True)


def desired_replicas(pod: str, environ=os.environ, sa_dir: str = SA) -> Optional[int]:
    """spec.replicas of this pod's StatefulSet (JM_STATEFULSET, default the pod name
    without its ordinal), read with the pod's service account; None if it cannot be read."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    ns = environ.get("POD_NAMESPACE")
    name = environ.get("JM_STATEFULSET") or pod.rpartition("-")[0]
    if not (host and port and ns and name):
        return None
    try:
        with open(os.path.join(sa_dir, "token")) as f:
            token = f.read().strip()
        ctx = ssl.create_default_context(cafile=os.path.join(sa_dir, "ca.crt"))
        req = urllib.request.Request(
            f"https://{host}:{port}/apis/apps/v1/namespaces/{ns}/statefulsets/{name}",
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"})
        with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
            return int(json.loads(resp.read())["spec"]["replicas"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        say(f"cannot read the StatefulSet {ns}/{name}: {exc}")
        return None


def _cluster(conf, urls: list[str]) -> Cluster:
    from jm.cluster import tls
    ctx = tls.client_context(conf)
    return Cluster(urls, conf.rest_token(), tls.scheme(conf), ctx if ctx is not True else None)


def join(conf, masters, me, timeout: float) -> int:
    """Add this pod's peer through a seed unless it is a member (or no cluster exists)."""
    from jm.cluster import tls
    seeds = [m.url(tls.scheme(conf)) for m in masters if m != me]
    cluster = _cluster(conf, seeds)
    in_masters = me in masters
    try:  # a pod that is not a seed cannot create the cluster: it waits for a seed
        answer = wait("a seed's member list", lambda: cluster.call("GET", "/cluster/peers"),
                      timeout if not in_masters else 0.0)
    except RollingError as exc:
        answer = None
        if not in_masters:
            say(f"no seed answered: {exc}")
            return 1
    decision = how_to_join(me.node_id, answer)
    say(f"{me.node_id}: {decision.reason}")
    if decision.action != ADD:
        return 0
    try:
        line = f"{me.host}:{me.rest_port}:{me.raft_port}"
        cluster.call("POST", "/cluster/peers", {"peer": line})
    except RollingError as exc:
        if " 409 " not in f" {exc} ":  # (a member already: another try got there first)
            say(f"cannot join: {exc}")
            return 1
    say(f"{me.node_id}: added to the cluster")
    return 0


def prestop(conf, masters, me, pod: str) -> int:
    """A pod scaled away leaves the cluster (drained first) before it stops."""
    replicas = desired_replicas(pod)
    if not scaled_away(pod, replicas):
        say(f"{pod}: not scaled away (ordinal {ordinal(pod)}, replicas {replicas}): "
            "the peer drains on SIGTERM and comes back")
        return 0
    say(f"{pod}: scaled away (replicas {replicas})")
    return leave(conf, masters, me)


def leave(conf, masters, me) -> int:
    """Ask the cluster to remove this peer (`DELETE /cluster/peers/{node}` with the drain
    deadline: its jobs move first) and wait until it is gone (the peer then stops)."""
    from jm.cluster import tls
    urls = [me.url(tls.scheme(conf))] + [m.url(tls.scheme(conf)) for m in masters if m != me]
    cluster = _cluster(conf, urls)
    deadline = conf["jobmanager.stop.drain-deadline"]
    say(f"{me.node_id}: leaving the cluster (drain deadline {deadline:g} s)")
    try:
        cluster.call("DELETE", f"/cluster/peers/{me.node_id}?deadline={deadline:g}")
        wait(f"{me.node_id} to leave", lambda: gone(me.node_id, cluster.call(
            "GET", "/cluster/peers", avoid=urls[0])),
             wait_budget(deadline, conf["jobmanager.cancel-timeout"]) or 30.0)
    except RollingError as exc:
        say(f"{me.node_id}: {exc}")
        return 1
    say(f"{me.node_id}: left the cluster")
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="jm.local.kube")
    ap.add_argument("action", choices=["join", "prestop", "leave"])
    ap.add_argument("--conf-dir", default=os.environ.get("JM_CONF_DIR", "conf"))
    ap.add_argument("--peer", required=True, help="this pod's HOST:REST-PORT:RAFT-PORT")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="join: how long a pod that is not a seed waits for one")
    ap.add_argument("-D", dest="overrides", action="append", default=[])
    args = ap.parse_args(argv)
    try:
        conf = load_config(args.conf_dir, parse_overrides(args.overrides),
                           home=os.environ.get("JM_HOME"))
        masters = read_masters(os.path.join(args.conf_dir, "masters"))
        me = parse_peer(args.peer, "--peer")
    except ConfigError as exc:
        say(str(exc))
        return 2
    if args.action == "join":
        return join(conf, masters, me, args.timeout)
    if args.action == "leave":  # (what prestop does for a pod scaled away)
        return leave(conf, masters, me)
    return prestop(conf, masters, me, os.environ.get("POD_NAME") or me.host.split(".")[0])


if __name__ == "__main__":
    sys.exit(main())
