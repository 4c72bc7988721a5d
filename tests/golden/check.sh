#!/usr/bin/env bash
# Compare a built mkshards with tests/data/golden/digests.txt:
#   tests/golden/check.sh build/tools/mkshards     (ctest: golden_pipeline)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
exec bash "$ROOT/tests/golden/golden.sh" "${1:-$ROOT/build/tools/mkshards}" "$ROOT/../shared" "$ROOT/tests/data" check
