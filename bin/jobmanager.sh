#!/usr/bin/env bash
# Start or stop one JobManager peer (Flink style).
#   bin/jobmanager.sh start|start-foreground|stop [HOST:REST-PORT:RAFT-PORT] [-D key=value ...] [--rejoin] [--no-drain]
# stop: SIGTERM; the peer drains first (jobmanager.stop.drain-deadline), then stops;
# --no-drain: it stops at once (a second signal right after the first, as a second Ctrl-C).
# The peer is a line of $JM_CONF_DIR/masters (default: the first local line).
set -uo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/config.sh"

usage() { echo "usage: jobmanager.sh start|start-foreground|stop [HOST:REST-PORT:RAFT-PORT] [-D key=value ...] [--rejoin] [--no-drain]" >&2; exit 2; }
[ $# -ge 1 ] || usage
ACTION="$1"; shift
PEER=""
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then PEER="$1"; shift; fi
ARGS=()
EXTRA=()  # for the peer only (not for resolving its files)
DRAIN=1   # stop: drain first (--no-drain: no)
while [ $# -gt 0 ]; do
    case "$1" in
        -D) [ $# -ge 2 ] || usage; ARGS+=(-D "$2"); shift 2 ;;
        -D*) ARGS+=(-D "${1#-D}"); shift ;;
        --rejoin) EXTRA+=(--rejoin); shift ;;  # its Raft data was lost: no vote until caught up
        --no-drain) DRAIN=0; shift ;;
        *) echo "jobmanager.sh: unexpected argument '$1'" >&2; usage ;;
    esac
done
PEER_ARGS=(); [ -n "$PEER" ] && PEER_ARGS=(--peer "$PEER")

RESOLVED="$("$JM_PYTHON" -m jm.local.launcher resolve --conf-dir "$JM_CONF_DIR" "${PEER_ARGS[@]}" "${ARGS[@]}")" || exit 2
IFS=$'\t' read -r PEER PID_FILE LOG_FILE <<< "$RESOLVED"

# alive = exists, is not a zombie, and is a jobmanager peer (not a reused PID)
is_peer_alive() {
    local pid="$1" state
    [ -n "$pid" ] && [ -r "/proc/$pid/stat" ] || return 1
    state="$(sed -e 's/^.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)"
    [ "$state" != "Z" ] && [ "$state" != "X" ] || return 1
    # (jm.cluster.peer: a peer of an older build, before a rolling upgrade reached it)
    tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qE "jm\.peer|jm\.cluster\.peer"
}

running_pid() {
    [ -f "$PID_FILE" ] || return 1
    local pid; pid="$(cat "$PID_FILE" 2>/dev/null)"
    is_peer_alive "$pid" && echo "$pid"
}

case "$ACTION" in
    start)
        if pid="$(running_pid)"; then
            echo "jobmanager $PEER is already running (pid $pid)." >&2; exit 1
        fi
        # the peer's log holds every tenant's job ids and errors: its alone (0600)
        (umask 077 && touch "$LOG_FILE") && chmod 600 "$LOG_FILE"
        nohup "$JM_PYTHON" -m jm.peer --conf-dir "$JM_CONF_DIR" --peer "$PEER" "${ARGS[@]}" "${EXTRA[@]}" \
            >> "$LOG_FILE" 2>&1 < /dev/null &
        echo $! > "$PID_FILE"
        echo "Starting jobmanager $PEER (pid $!, log $LOG_FILE)."
        ;;
    start-foreground)
        exec "$JM_PYTHON" -m jm.peer --conf-dir "$JM_CONF_DIR" --peer "$PEER" "${ARGS[@]}" "${EXTRA[@]}"
        ;;
    stop)
        if ! pid="$(running_pid)"; then
            echo "No jobmanager $PEER to stop."; rm -f "$PID_FILE"; exit 0
        fi
        # the peer drains first (jobmanager.stop.drain-deadline), then stops: wait for
        # the deadline plus a margin (jm/policy/members/stopdrain.py stop_grace) before SIGKILL
        GRACE="$("$JM_PYTHON" -m jm.local.stopgrace --conf-dir "$JM_CONF_DIR" "${ARGS[@]}" 2>/dev/null)" \
            && [ "$GRACE" -gt 0 ] 2>/dev/null || GRACE=90
        kill -TERM "$pid" 2>/dev/null
        if [ "$DRAIN" = 0 ]; then
            kill -INT "$pid" 2>/dev/null  # a second signal: no drain (another kind: never merged)
        else
            echo "Stopping jobmanager $PEER (pid $pid): it drains first, waiting up to $GRACE s."
        fi
        end=$((SECONDS + GRACE))
        while [ "$SECONDS" -lt "$end" ]; do
            is_peer_alive "$pid" || break
            sleep 0.1
        done
        if is_peer_alive "$pid"; then
            echo "jobmanager $PEER (pid $pid) did not stop in $GRACE s; killing it." >&2
            kill -KILL "$pid" 2>/dev/null
        fi
        rm -f "$PID_FILE"
        echo "Stopped jobmanager $PEER (pid $pid)."
        ;;
    *) usage ;;
esac
