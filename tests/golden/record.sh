#!/usr/bin/env bash
# Re-record tests/data/golden/digests.txt with a built mkshards:
#   tests/golden/record.sh build/tools/mkshards
# Only when an output change is intended; say why in the commit.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
exec bash "$ROOT/tests/golden/golden.sh" "${1:-$ROOT/build/tools/mkshards}" "$ROOT/../shared" "$ROOT/tests/data" record
