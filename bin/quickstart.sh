#!/usr/bin/env bash
# One command from a fresh clone: install, start a local 3-peer cluster (conf/masters),
# submit the example word count through REST, wait for it, print its result.
#   bin/quickstart.sh            (stop the cluster later with bin/stop-cluster.sh)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$HERE"

# what it needs, checked before anything is installed or started
need() { echo "quickstart: $1" >&2; exit 1; }
command -v python3 >/dev/null || need "Python 3.10 or later is needed: install python3 \
(Debian/Ubuntu: apt-get install python3 python3-venv; macOS: brew install python)"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
    || need "Python 3.10 or later is needed (found $(python3 -V 2>&1))"
python3 -c 'import venv, ensurepip' 2>/dev/null \
    || need "python3 cannot make virtual environments: install python3-venv (Debian/Ubuntu)"
JAVA="${JAVA_HOME:+$JAVA_HOME/bin/}java"
command -v "$JAVA" >/dev/null || need "Java 17 or later is needed for Spark and was not \
found${JAVA_HOME:+ at \$JAVA_HOME ($JAVA_HOME)}: install it (Debian/Ubuntu: apt-get install \
openjdk-17-jre-headless; macOS: brew install openjdk@17) or set JAVA_HOME"
version=$("$JAVA" -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')
major=${version%%.*}
[ "$major" = 1 ] && major=$(echo "$version" | cut -d. -f2)  # 1.8.0_392: Java 8
[ "${major:-0}" -ge 17 ] 2>/dev/null || need "Java 17 or later is needed for Spark 4 (found \
${version:-an unknown version} at $(command -v "$JAVA")): install openjdk-17 or set JAVA_HOME"

if [ ! -f .venv/.jm-installed ]; then  # the first run (or one that did not finish)
    echo "==> first run: creating .venv and installing the project (pyspark and its"
    echo "    dependencies are about 450 MB to download; pip shows its progress)"
    [ -x .venv/bin/python ] || python3 -m venv .venv
    .venv/bin/python -m pip install --upgrade pip
    .venv/bin/python -m pip install -e .
    touch .venv/.jm-installed
else
    .venv/bin/python -m pip install -q -e . >/dev/null
fi
echo "==> starting the peers listed in conf/masters"
bin/start-cluster.sh "$@" || echo "    (some peers were already running; using them)"
exec .venv/bin/python -m jm.local.quickstart --conf-dir "${JM_CONF_DIR:-$HERE/conf}" \
    --input "$HERE/examples/data/words.txt" --example "$HERE/examples/wordcount.py"
