#!/usr/bin/env bash
# Start every peer listed in $JM_CONF_DIR/masters (local ones directly, others over ssh).
#   bin/start-cluster.sh [-D key=value ...]
set -uo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/config.sh"
PEERS="$("$JM_PYTHON" -m jm.launcher peers --conf-dir "$JM_CONF_DIR")" || exit 2
status=0
for peer in $PEERS; do
    host="${peer%%:*}"
    if jm_is_local_host "$host"; then
        "$JM_BIN/jobmanager.sh" start "$peer" "$@" || status=1
    else
        ssh -n "$host" -- "cd '$JM_INSTALL' && JM_CONF_DIR='$JM_CONF_DIR' bin/jobmanager.sh start '$peer' $*" || status=1
    fi
done
exit $status
