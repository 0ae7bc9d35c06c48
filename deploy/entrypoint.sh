#!/bin/sh
# The container's entry point: runs one peer in the foreground.
# In a Kubernetes StatefulSet (JM_SERVICE set): conf/masters lists the pods' stable DNS
# names <statefulset>-<i>.<service>.<namespace>.svc.<domain>, i = 0 .. JM_REPLICAS-1, and
# this pod runs the line of its own name. Without JM_SERVICE: the image's conf/masters.
# JM_REJOIN=1 starts the peer with --rejoin (its volume was replaced: README "Security").
set -eu
REST_PORT="${JM_REST_PORT:-8081}"
RAFT_PORT="${JM_RAFT_PORT:-6123}"
ARGS=""
[ "${JM_REJOIN:-0}" = "1" ] && ARGS="--rejoin"
if [ -n "${JM_SERVICE:-}" ]; then
    : "${JM_REPLICAS:?set JM_REPLICAS to the StatefulSet's replicas}"
    : "${POD_NAME:?set POD_NAME from metadata.name}"
    : "${POD_NAMESPACE:?set POD_NAMESPACE from metadata.namespace}"
    DOMAIN="${JM_CLUSTER_DOMAIN:-cluster.local}"
    BASE="${POD_NAME%-*}"
    CONF="${JM_MASTERS_DIR:-/tmp/jm-conf}"
    mkdir -p "$CONF"
    cp "$JM_CONF_DIR/config.yaml" "$CONF/config.yaml" 2>/dev/null || : > "$CONF/config.yaml"
    i=0
    : > "$CONF/masters"
    while [ "$i" -lt "$JM_REPLICAS" ]; do
        echo "$BASE-$i.$JM_SERVICE.$POD_NAMESPACE.svc.$DOMAIN:$REST_PORT:$RAFT_PORT" >> "$CONF/masters"
        i=$((i + 1))
    done
    export JM_CONF_DIR="$CONF"
    PEER="$POD_NAME.$JM_SERVICE.$POD_NAMESPACE.svc.$DOMAIN:$REST_PORT:$RAFT_PORT"
    [ -n "${JM_DRY_RUN:-}" ] && { echo "$PEER $ARGS"; exit 0; }
    exec "$JM_HOME/bin/jobmanager.sh" start-foreground "$PEER" $ARGS
fi
[ -n "${JM_DRY_RUN:-}" ] && { echo "(conf/masters) $ARGS"; exit 0; }
exec "$JM_HOME/bin/jobmanager.sh" start-foreground $ARGS
