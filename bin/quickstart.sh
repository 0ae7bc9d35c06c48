#!/usr/bin/env bash
# One command from a fresh clone: install, start a local 3-peer cluster (conf/masters),
# submit the example word count through REST, wait for it, print its result.
#   bin/quickstart.sh            (stop the cluster later with bin/stop-cluster.sh)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$HERE"
if [ ! -x .venv/bin/python ]; then
    echo "==> creating .venv and installing (first run downloads pyspark, ~450 MB)"
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e . >/dev/null
echo "==> starting the peers listed in conf/masters"
bin/start-cluster.sh "$@" || echo "    (some peers were already running; using them)"
exec .venv/bin/python -m jm.local.quickstart --conf-dir "${JM_CONF_DIR:-$HERE/conf}" \
    --input "$HERE/examples/data/words.txt" --example "$HERE/examples/wordcount.py"
