#!/usr/bin/env bash
# Stop every peer listed in $JM_CONF_DIR/masters.   bin/stop-cluster.sh [-D key=value ...]
# (-D as given to start-cluster.sh, e.g. when it changed env.pid.dir or env.ssh.opts)
exec "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/cluster.sh" stop "$@"
