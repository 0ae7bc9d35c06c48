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
exec .venv/bin/python -m pytest "$@"
