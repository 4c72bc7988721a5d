#!/bin/bash
# ctest readme_examples: every ```sh and ```python block of README.md, run in
# order in a scratch folder on the samples and ../shared (tests/readme_examples.py
# says how; blocks the test cannot run carry a visible readme-test marker).
# The Python blocks run in the venv tests/python/run.sh builds (made or
# refreshed here with --setup-only, so the package is this tree's); without a
# venv they are skipped and the test exits 77 if everything else passed.
# torch blocks are skipped when the venv has no torch; with torch in
# MKS_PY_OPTIONAL (run.sh is then meant to install it) and CI=true they fail.
# Args: BUILD_DIR MKS_BIN LLMTRAIN_BIN SHARED_DIR
set -u
BUILD=$1 BIN=$2 LLM=$3 SHARED=$4
SRC=$(cd "$(dirname "$0")/.." && pwd)
PYARGS=()
bash "$SRC/tests/python/run.sh" "$BUILD" "$BIN" - "$SHARED" --setup-only
rc=$?
if [ $rc -eq 0 ]; then
  PYARGS=(--python "$BUILD/python-venv/bin/python")
elif [ $rc -eq 77 ]; then
  echo "note: no Python venv: the README's Python blocks are skipped"
else
  echo "FAIL: the Python venv setup (tests/python/run.sh --setup-only) failed with $rc"
  exit 1
fi
case " ${MKS_PY_OPTIONAL-} " in
  *" torch "*) [ "${CI:-}" = true ] && PYARGS+=(--require torch) ;;
esac
exec python3 "$SRC/tests/readme_examples.py" --readme "$SRC/README.md" --src "$SRC" --shared "$SHARED" \
  --bin "$(dirname "$BIN")" --bin "$(dirname "$LLM")" "${PYARGS[@]}"
