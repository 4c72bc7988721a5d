#!/bin/bash
# ctest test_tk_meta: Meta's own Llama 3 / Llama 4 tokenizer.model (2.2 MB /
# 3.6 MB, not committed) from the llama-models 0.3.0 wheel on PyPI, fetched
# once into CACHE, then test_tk_meta (ids against tests/data/tk_meta) and the
# CLI: tokenizer info names the family and its framing, and a --pattern other
# than the family's warns naming both.
# Args: TEST_BIN MKS_BIN SHARED_DIR CACHE_DIR. Exit 77 (skipped) when the
# wheel cannot be fetched (no package index) and is not in CACHE.
set -u
TEST=$1 BIN=$2 SHARED=$3 CACHE=$4
VER=0.3.0
WHL=$CACHE/llama_models-$VER-py3-none-any.whl
PKG=$CACHE/llama_models-$VER/llama_models
mkdir -p "$CACHE" || exit 1
if [ ! -f "$PKG/llama4/tokenizer.model" ]; then
  if [ ! -f "$WHL" ]; then
    PY=
    for p in "${PYTHON:-python3}" python3; do "$p" -m pip --version >/dev/null 2>&1 && { PY=$p; break; }; done
    [ -n "$PY" ] || { echo "skip: no pip to fetch llama-models $VER"; exit 77; }
    if ! timeout 300 "$PY" -m pip download -q --disable-pip-version-check --no-deps "llama-models==$VER" \
        -d "$CACHE" >/dev/null 2>&1 || [ ! -f "$WHL" ]; then
      echo "skip: cannot fetch llama-models $VER (no package index?)"; exit 77
    fi
  fi
  rm -rf "$CACHE/llama_models-$VER"
  python3 -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("llama_models/llama") and n.endswith("/tokenizer.model")])' \
    "$WHL" "$CACHE/llama_models-$VER" || exit 1
fi
"$TEST" "$SHARED" "$PKG"; rc=$?
[ $rc -eq 0 ] || exit $rc

fail=0
T3=$PKG/llama3/tokenizer.model T4=$PKG/llama4/tokenizer.model
info=$("$BIN" tokenizer info --tokenizer "$T3" 2>&1)
for want in "llama3" "128256" "<|begin_of_text|>" "<|end_of_text|>"; do
  grep -qF -- "$want" <<<"$info" || { echo "FAIL: tokenizer info on Llama 3's tokenizer.model lacks '$want':"; echo "$info"; fail=1; }
done
out=$(printf 'Hello world\n' | "$BIN" encode --tokenizer "$T4" --pattern cl100k --ids-out /dev/null 2>&1); rc=$?
if [ $rc -ne 0 ] || ! grep -q "pattern cl100k differs from the pattern o200k that llama4 needs" <<<"$out"; then
  echo "FAIL: --pattern cl100k on Llama 4's file: rc $rc, no warning naming both patterns: $out"; fail=1
fi
out=$(printf 'Hello world\n' | "$BIN" encode --tokenizer "$T3" --pattern cl100k --ids-out /dev/null 2>&1)
if grep -q "differs" <<<"$out"; then echo "FAIL: --pattern cl100k on Llama 3's own pattern warns: $out"; fail=1; fi
[ $fail -eq 0 ] && echo "cli checks: ok"
exit $fail
