#!/usr/bin/env bash
# Build the light client distribution (jm CLI + Python client, no pyspark):
#   bin/build-client.sh [OUT_DIR]     then: pip install OUT_DIR/jm_client-*.whl
set -euo pipefail
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/config.sh"
exec "$JM_PYTHON" -m jm.local.clientdist "$@"
