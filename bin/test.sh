#!/usr/bin/env bash
# One command from a fresh clone: install everything and run the whole test suite.
#   bin/test.sh                  (extra arguments: one pytest run with them, e.g. -m "not slow")
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$HERE"
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q --no-compile -e ".[test]" >/dev/null
# the bytecode of what pip installed and of our own modules, compiled on every core (pip
# compiles one file at a time: 110 s for the install instead of 40 + 26 s here); ours too:
# where PYTHONDONTWRITEBYTECODE is set (as in many CI images) every peer, zygote, SQL
# worker and CLI process the tests start would compile them again (0.5 s of CPU a peer)
.venv/bin/python -m compileall -q -j 0 .venv/lib jm raft rest chaos tests examples \
    >/dev/null 2>&1 || true
# Apache Flink's distribution from PyPI (its `flink` CLI drives a cluster in
# tests/e2e/test_flink_cli.py), cached in bench/.flink (git-ignored); that test skips, saying
# why, when the download fails
.venv/bin/python bench/flinkdist.py >/dev/null || \
    echo "warning: could not download Apache Flink from PyPI; tests/e2e/test_flink_cli.py" \
         "will be skipped" >&2
# Apache Superset's released version (tests/superset-constraints.txt; SQLAlchemy 1.4) in an
# environment of its own, .cache/superset (git-ignored), made while the rest installs and
# the fast tests run (90 s, mostly download): tests/integration/test_sqlalchemy.py drives it
# and SQLAlchemy 1.4 through the jm:// dialect, and skips, saying why, when it is missing
.venv/bin/python tests/superset_env.py --install .cache/superset &
SUPERSET=$!
superset_made() {
    wait "$SUPERSET" || echo "warning: could not make Superset's environment in" \
        ".cache/superset (tests/superset_env.py)" >&2
    SUPERSET=
}
# stopped, with its pip, when this script ends or is stopped before it is waited for
superset_stop() {
    if [ -n "${SUPERSET:-}" ]; then
        pkill -P "$SUPERSET" 2>/dev/null || true
        kill "$SUPERSET" 2>/dev/null || true
    fi
}
trap superset_stop EXIT
trap 'superset_stop; exit 130' INT
trap 'superset_stop; exit 143' TERM
# the lowest versions pyproject.toml allows of the runtime dependencies, in .cache/lowest
# (tests/lowest.py; tests/integration/test_lowest_versions.py runs with them)
.venv/bin/python tests/lowest.py --install .cache/lowest || \
    echo "warning: could not install the lowest allowed versions into .cache/lowest" >&2
# Debian packages the real-part tests use: headless Chromium and its driver (the web UI),
# openssh-server (peers started over ssh on namespace hosts), fuse3 (the power-loss
# filesystem under the peers' data dirs), faketime (clock faults), zsh and fish (the jm
# CLI's shell completion in each shell)
NEED=()
[ -x /usr/bin/chromium ] || NEED+=(chromium)
[ -x /usr/bin/chromedriver ] || NEED+=(chromium-driver)
[ -x /usr/sbin/sshd ] || NEED+=(openssh-server)
compgen -G "/usr/lib/*/libfuse3.so.3" >/dev/null || NEED+=(fuse3)
command -v faketime >/dev/null || NEED+=(faketime)
command -v zsh >/dev/null || NEED+=(zsh)
command -v fish >/dev/null || NEED+=(fish)
if [ ${#NEED[@]} -gt 0 ]; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        echo "installing Debian packages for the tests: ${NEED[*]}" >&2
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${NEED[@]}" >/dev/null
    else
        echo "warning: missing Debian packages (apt-get install ${NEED[*]} as root);" \
             "the tests that need them will fail" >&2
    fi
fi
if [ $# -gt 0 ]; then
    superset_made
    exec .venv/bin/python -m pytest "$@"
fi
# The whole suite: the fast tests on two workers (pytest-xdist; a test file stays on one
# worker, so its module fixtures are made once), then the slow real-process tests one at a
# time (they start whole clusters, Spark and faults whose timing is what they test).
rc=0
.venv/bin/python -m pytest -m "not slow" -n 2 --dist loadfile || rc=$?
superset_made
.venv/bin/python -m pytest -m slow || rc=$?
exit $rc
