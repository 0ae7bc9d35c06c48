#!/usr/bin/env bash
# Start every peer listed in $JM_CONF_DIR/masters.   bin/start-cluster.sh [-D key=value ...]
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/cluster.sh" start "$@"
