#!/bin/bash
# ctest py_package: `pip install .` into a venv under the build folder, then
# pytest tests/python against the installed package (run from outside the
# source tree so `import mkshards` is the installed one).
# Args: BUILD_DIR MKS_BIN LOADER_DUMP SHARED_DIR [--setup-only]
# Exit 77 (skipped) when python3 -m venv is unavailable (make deps installs
# python3-venv) or the package index cannot be reached for the build
# requirements; pytest's "no tests ran" (5) is reported as a skip too.
# --setup-only: make the venv and install the package, no pytest (the
# README examples test, tests/readme_examples.sh, runs its Python blocks there).
set -u
BUILD=$1 BIN=$2 DUMP=$3 SHARED=$4 MODE=${5:-}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
PY=${PYTHON:-python3}
V=$BUILD/python-venv
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
  echo "skip: no python3 >= 3.9"; exit 77
fi
if [ ! -x "$V/bin/python" ]; then
  rm -rf "$V"
  if ! "$PY" -m venv "$V" >/dev/null 2>&1; then
    rm -rf "$V"
    echo "skip: '$PY -m venv' failed (install python3-venv: make deps)"; exit 77
  fi
fi
REQ="scikit-build-core>=0.10 numpy pytest"
if ! "$V/bin/python" -c 'import scikit_build_core, numpy, pytest' 2>/dev/null; then
  if ! "$V/bin/python" -m pip install -q --disable-pip-version-check $REQ; then
    echo "skip: cannot install $REQ (no package index?)"; exit 77
  fi
fi
# optional peers: live tiktoken and HF tokenizers parity, hypothesis for tiktoken's own test suite (test_tiktoken_api.py), zstandard for mkshards_reader.py's
# compressed shards, pyarrow for Arrow sources in test_source.py, PyTorch datasets (skipped when absent)
for opt in ${MKS_PY_OPTIONAL-tiktoken zstandard hypothesis tokenizers pyarrow}; do
  "$V/bin/python" -c "import $opt" 2>/dev/null || "$V/bin/python" -m pip install -q --disable-pip-version-check "$opt" \
    >/dev/null 2>&1 || echo "note: $opt not installed; its tests are skipped"
done
# the PEP 517 build through CMake (scikit-build-core), incremental in BUILD/python-build
if ! "$V/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps \
    --config-settings=build-dir="$BUILD/python-build" "$SRC"; then
  echo "FAIL: pip install . failed"; exit 1
fi
[ "$MODE" = --setup-only ] && exit 0
cd "$BUILD" || exit 1
MKS_BIN=$BIN MKS_LOADER_DUMP=$DUMP MKS_SHARED=$SHARED MKS_SHARD_GEN=$BUILD/tests/hostile_shards_gen \
  exec bash "$SRC/tests/python/pytest_rc.sh" "$V/bin/python" -q -p no:cacheprovider -rs --durations=5 "$SRC/tests/python"
