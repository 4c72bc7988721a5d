#!/usr/bin/env bash
# run_fuzz.sh [SECONDS] - bounded libFuzzer + ASan/UBSan run of the reader /
# lint fuzz target (tests/fuzz_reader.c) for CI. Configures build-fuzz/ with
# clang and -DMKS_FUZZ=ON, then runs the ctest `fuzz_reader_run` (label fuzz):
# the committed corpus tests/data/fuzz/reader is replayed first, then new
# inputs are explored for SECONDS (default 60) into a temporary folder.
# Needs: clang, libclang-rt-14-dev (or the matching compiler-rt).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs=${1:-60}
bd=${FUZZ_BUILD_DIR:-build-fuzz}
if ! command -v clang > /dev/null; then
    echo "run_fuzz.sh: clang not found (apt-get install clang libclang-rt-14-dev)" >&2
    exit 77
fi
CC=clang cmake -S . -B "$bd" -DCMAKE_BUILD_TYPE=Debug -DMKS_FUZZ=ON -DMKS_ENABLE_CUDA=OFF \
    -DMKS_FUZZ_SECONDS="$secs" > /dev/null
cmake --build "$bd" -j"$(nproc)" --target fuzz_reader test_fuzz_replay
ctest --test-dir "$bd" --output-on-failure -R '^(fuzz_reader_run|test_fuzz_replay)$'
