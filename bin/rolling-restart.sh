#!/usr/bin/env bash
# Restart every member of the running cluster, one at a time, the Raft leader last:
# drain -> stop -> start -> undrain (jm/local/rolling.py). Remote peers over ssh, as
# start-cluster.sh does.
#   bin/rolling-restart.sh [--deadline D] [--step-timeout D] [-D key=value ...]
set -uo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/config.sh"
exec "$JM_PYTHON" -m jm.local.rolling --conf-dir "$JM_CONF_DIR" "$@"
