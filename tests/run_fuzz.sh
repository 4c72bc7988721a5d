#!/usr/bin/env bash
# run_fuzz.sh [SECONDS] - bounded libFuzzer + ASan/UBSan runs of every fuzz
# target (mks_add_fuzz in tests/CMakeLists.txt: one per parser of untrusted
# bytes) for CI. Configures build-fuzz/ with clang and -DMKS_FUZZ=ON, then runs
# the ctests labelled fuzz, two at a time: each replays its committed corpus
# (tests/data/fuzz/NAME) first, then explores new inputs for SECONDS (default
# 30) into a temporary folder.
# Needs: clang, libclang-rt-14-dev (or the matching compiler-rt).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
secs=${1:-30}
bd=${FUZZ_BUILD_DIR:-build-fuzz}
if ! command -v clang > /dev/null; then
    echo "run_fuzz.sh: clang not found (apt-get install clang libclang-rt-14-dev)" >&2
    exit 77
fi
CC=clang cmake -S . -B "$bd" -DCMAKE_BUILD_TYPE=Debug -DMKS_FUZZ=ON -DMKS_ENABLE_CUDA=OFF \
    -DMKS_FUZZ_SECONDS="$secs" > /dev/null
cmake --build "$bd" -j"$(nproc)"
ctest --test-dir "$bd" --output-on-failure -L fuzz -j2
