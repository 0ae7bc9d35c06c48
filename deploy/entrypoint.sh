#!/bin/sh
# The container's entry point: runs one peer in the foreground.
#   entrypoint.sh            the peer
#   entrypoint.sh prestop    the container's preStop hook (Kubernetes)
# In a Kubernetes StatefulSet (JM_SERVICE set): conf/masters, the seed list, lists the
# pods' stable DNS names <statefulset>-<i>.<service>.<namespace>.svc.<domain>,
# i = 0 .. JM_REPLICAS-1 (the replicas the cluster was created with), and this pod runs
# the line of its own name. A pod that is not a member (ordinal JM_REPLICAS or more, added
# by scaling up; or scaled away before) first asks a seed to add it; its preStop, when the
# StatefulSet scales it away, asks the cluster to remove it (drained first) and waits
# (python -m jm.local.kube; docs/guide/kubernetes.md). Without JM_SERVICE: the image's
# conf/masters. JM_REJOIN=1 starts the peer with --rejoin (its volume was replaced: README
# "Security").
set -eu
REST_PORT="${JM_REST_PORT:-8081}"
RAFT_PORT="${JM_RAFT_PORT:-6123}"
ACTION="${1:-run}"
ARGS=""
[ "${JM_REJOIN:-0}" = "1" ] && ARGS="--rejoin"
if [ -n "${JM_SERVICE:-}" ]; then
    : "${JM_REPLICAS:?set JM_REPLICAS to the StatefulSet's initial replicas (the seeds)}"
    : "${POD_NAME:?set POD_NAME from metadata.name}"
    : "${POD_NAMESPACE:?set POD_NAMESPACE from metadata.namespace}"
    DOMAIN="${JM_CLUSTER_DOMAIN:-cluster.local}"
    BASE="${POD_NAME%-*}"
    CONF="${JM_MASTERS_DIR:-/tmp/jm-conf}"
    mkdir -p "$CONF"
    cp "$JM_CONF_DIR/config.yaml" "$CONF/config.yaml" 2>/dev/null || : > "$CONF/config.yaml"
    i=0
    : > "$CONF/masters.new"
    while [ "$i" -lt "$JM_REPLICAS" ]; do
        echo "$BASE-$i.$JM_SERVICE.$POD_NAMESPACE.svc.$DOMAIN:$REST_PORT:$RAFT_PORT" >> "$CONF/masters.new"
        i=$((i + 1))
    done
    mv "$CONF/masters.new" "$CONF/masters"
    export JM_CONF_DIR="$CONF"
    PEER="$POD_NAME.$JM_SERVICE.$POD_NAMESPACE.svc.$DOMAIN:$REST_PORT:$RAFT_PORT"
    if [ "$ACTION" = "prestop" ]; then
        [ -n "${JM_DRY_RUN:-}" ] && { echo "prestop $PEER"; exit 0; }
        exec "$JM_PYTHON" -m jm.local.kube prestop --conf-dir "$CONF" --peer "$PEER"
    fi
    [ -n "${JM_DRY_RUN:-}" ] && { echo "$PEER $ARGS"; exit 0; }
    "$JM_PYTHON" -m jm.local.kube join --conf-dir "$CONF" --peer "$PEER"
    exec "$JM_HOME/bin/jobmanager.sh" start-foreground "$PEER" $ARGS
fi
[ "$ACTION" = "prestop" ] && exit 0  # not in a StatefulSet: SIGTERM drains the peer
[ -n "${JM_DRY_RUN:-}" ] && { echo "(conf/masters) $ARGS"; exit 0; }
exec "$JM_HOME/bin/jobmanager.sh" start-foreground $ARGS
