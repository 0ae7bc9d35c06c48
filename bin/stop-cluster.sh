#!/usr/bin/env bash
# Stop every peer listed in $JM_CONF_DIR/masters.
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/cluster.sh" stop
