#!/usr/bin/env bash
# Build the light client distribution, jm-client (jm CLI + Python client, no pyspark), with
# hatchling from clients/jm-client:
#   bin/build-client.sh [OUT_DIR]     then: pip install OUT_DIR/jm_client-*.whl
# It prints the wheel's path. (Offline: the build runs in this environment, whose
# `build` and `hatchling` come with the project's test extras.)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$HERE/bin/config.sh"
OUT="${1:-$HERE/dist}"
mkdir -p "$OUT"
if ! "$JM_PYTHON" -c 'import build, hatchling' 2>/dev/null; then
    echo "build-client: needs the 'build' and 'hatchling' packages: pip install build hatchling" >&2
    exit 1
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! "$JM_PYTHON" -m build --wheel --no-isolation --outdir "$OUT" "$HERE/clients/jm-client" \
        >"$log" 2>&1; then
    cat "$log" >&2
    echo "build-client: the build failed (above)" >&2
    exit 1
fi
wheel=$(sed -n 's/^Successfully built \(.*\.whl\)$/\1/p' "$log" | tail -1)
echo "$OUT/$wheel"
