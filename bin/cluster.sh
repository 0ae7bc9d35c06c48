#!/usr/bin/env bash
# Run jobmanager.sh ACTION for every peer in $JM_CONF_DIR/masters: local hosts directly,
# others over ssh (like Flink), with the options of env.ssh.opts. The remote command runs
# bin/jobmanager.sh in this installation's path on that host, with the same JM_CONF_DIR
# (and JM_HOME, if set) as absolute paths, and the same -D overrides.
# Used by start-cluster.sh and stop-cluster.sh.
#   bin/cluster.sh start|stop [-D key=value ...]
set -uo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/config.sh"
usage() { echo "usage: cluster.sh start|stop [-D key=value ...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
ACTION="$1"; shift
case "$ACTION" in start|stop) ;; *) usage ;; esac
ARGS=()
while [ $# -gt 0 ]; do
    case "$1" in
        -D) [ $# -ge 2 ] || usage; ARGS+=(-D "$2"); shift 2 ;;
        -D*) ARGS+=(-D "${1#-D}"); shift ;;
        *) echo "cluster.sh: unexpected argument '$1'" >&2; usage ;;
    esac
done
# the remote shell starts in the user's home: give it absolute paths
case "$JM_CONF_DIR" in /*) ;; *) JM_CONF_DIR="$PWD/$JM_CONF_DIR" ;; esac
if [ -n "${JM_HOME:-}" ]; then
    case "$JM_HOME" in /*) ;; *) JM_HOME="$PWD/$JM_HOME" ;; esac
fi
# the lines of masters, or the peers in $JM_PEERS (bin/rolling-restart.sh: one member)
OPTS=()
if [ -n "${JM_PEERS:-}" ]; then
    PEERS="$JM_PEERS"
else
    PEERS="$("$JM_PYTHON" -m jm.local.launcher peers --conf-dir "$JM_CONF_DIR")" || exit 2
    # the whole cluster stops: its peers have nowhere to drain their jobs to (they resume
    # from their checkpoints when it starts again)
    [ "$ACTION" = stop ] && OPTS=(--no-drain)
fi

# env.ssh.opts (config.yaml or -D), split as a shell would; read before anything starts
SSH_OPTS=()
for peer in $PEERS; do
    if ! jm_is_local_host "${peer%%:*}"; then
        out="$("$JM_PYTHON" -m jm.local.launcher ssh-opts --conf-dir "$JM_CONF_DIR" \
            "${ARGS[@]}")" || exit 2
        [ -z "$out" ] || mapfile -t SSH_OPTS <<< "$out"
        break
    fi
done

remote_command() {  # the command line for the remote login shell, every word quoted
    local cmd a
    cmd="cd $(jm_quote "$JM_INSTALL") && JM_CONF_DIR=$(jm_quote "$JM_CONF_DIR")"
    [ -z "${JM_HOME:-}" ] || cmd+=" JM_HOME=$(jm_quote "$JM_HOME")"
    cmd+=" bin/jobmanager.sh"
    for a in "$ACTION" "$1" "${ARGS[@]}" "${OPTS[@]}"; do cmd+=" $(jm_quote "$a")"; done
    printf '%s' "$cmd"
}

status=0
for peer in $PEERS; do
    host="${peer%%:*}"
    if jm_is_local_host "$host"; then
        "$JM_BIN/jobmanager.sh" "$ACTION" "$peer" "${ARGS[@]}" "${OPTS[@]}" || status=1
    else
        ssh -n "${SSH_OPTS[@]}" "$host" -- "$(remote_command "$peer")"
        rc=$?
        if [ $rc -eq 255 ]; then
            echo "cluster.sh: ssh to $host failed (could not $ACTION $peer)" >&2; status=1
        elif [ $rc -ne 0 ]; then
            echo "cluster.sh: jobmanager.sh $ACTION $peer on $host exited $rc" >&2; status=1
        fi
    fi
done
exit $status
