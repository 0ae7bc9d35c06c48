# Sourced by the bin/ scripts: locate the installation, the config and Python.
JM_BIN="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JM_INSTALL="$(dirname "$JM_BIN")"
JM_CONF_DIR="${JM_CONF_DIR:-$JM_INSTALL/conf}"
if [ -z "${JM_PYTHON:-}" ]; then
    if [ -x "$JM_INSTALL/.venv/bin/python" ]; then
        JM_PYTHON="$JM_INSTALL/.venv/bin/python"
    else
        JM_PYTHON="$(command -v python3)"
    fi
fi
export PYTHONPATH="$JM_INSTALL${PYTHONPATH:+:$PYTHONPATH}"

jm_is_local_host() {
    case "$1" in
        127.*|localhost|"$(hostname)"|"$(hostname -f 2>/dev/null)") return 0 ;;
        *) return 1 ;;
    esac
}

# $1 quoted for a POSIX shell (the login shell of a remote host): 'it'\''s'
jm_quote() {
    local s="${1//\'/\'\\\'\'}"
    printf "'%s'" "$s"
}
