#!/usr/bin/env bash
# Run jobmanager.sh ACTION for every peer in $JM_CONF_DIR/masters: local hosts directly,
# others over ssh (like Flink). Used by start-cluster.sh and stop-cluster.sh.
#   bin/cluster.sh start|stop [-D key=value ...]
set -uo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/config.sh"
ACTION="${1:?usage: cluster.sh start|stop [-D key=value ...]}"; shift
PEERS="$("$JM_PYTHON" -m jm.local.launcher peers --conf-dir "$JM_CONF_DIR")" || exit 2
status=0
for peer in $PEERS; do
    host="${peer%%:*}"
    if jm_is_local_host "$host"; then
        "$JM_BIN/jobmanager.sh" "$ACTION" "$peer" "$@" || status=1
    else
        ssh -n "$host" -- "cd '$JM_INSTALL' && JM_CONF_DIR='$JM_CONF_DIR' bin/jobmanager.sh $ACTION '$peer' $*" || status=1
    fi
done
exit $status
