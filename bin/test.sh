#!/usr/bin/env bash
# One command from a fresh clone: install everything and run the whole test suite.
#   bin/test.sh                  (extra arguments go to pytest, e.g. -m "not slow")
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$HERE"
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e ".[test]" >/dev/null
# the web UI is tested in a real headless Chromium (Debian's, driven by chromedriver)
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
        echo "installing Debian chromium and chromium-driver for the web UI tests" >&2
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
    else
        echo "warning: chromium and chromium-driver are missing (apt-get install chromium" \
             "chromium-driver as root); the web UI tests will fail" >&2
    fi
fi
exec .venv/bin/python -m pytest "$@"
