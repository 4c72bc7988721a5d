#!/bin/bash
# ctest test_tk_tekken_real: the real tekken.json files mistral_common ships
# (tekken_240718.json 15 MB, tekken_240911.json 19 MB; not committed), taken
# from the mistral-common 1.13.1 wheel on PyPI, fetched once into CACHE, then
# test_tk_tekken on them (ids against tests/data/tk_tekken/refs.jsonl.zst) and
# the CLI: tokenizer info names the file, its 1000 specials and its framing,
# build-style framing gives <s> = 1 ... </s> = 2, load < 150 ms CPU.
# Args: TEST_BIN MKS_BIN SHARED_DIR CACHE_DIR. Exit 77 (skipped) when the
# wheel cannot be fetched (no package index) and is not in CACHE.
set -u
TEST=$1 BIN=$2 SHARED=$3 CACHE=$4
VER=1.13.1
WHL=$CACHE/mistral_common-$VER-py3-none-any.whl
DIR=$CACHE/mistral_common-$VER
mkdir -p "$CACHE" || exit 1
if [ ! -f "$DIR/tekken_240911.json" ] || [ ! -f "$DIR/tekken_240718.json" ]; then
  if [ ! -f "$WHL" ]; then
    PY=
    for p in "${PYTHON:-python3}" python3; do "$p" -m pip --version >/dev/null 2>&1 && { PY=$p; break; }; done
    [ -n "$PY" ] || { echo "skip: no pip to fetch mistral-common $VER"; exit 77; }
    if ! timeout 300 "$PY" -m pip download -q --disable-pip-version-check --no-deps "mistral-common==$VER" \
        -d "$CACHE" >/dev/null 2>&1 || [ ! -f "$WHL" ]; then
      echo "skip: cannot fetch mistral-common $VER (no package index?)"; exit 77
    fi
  fi
  rm -rf "$DIR" && mkdir -p "$DIR" || exit 1
  python3 -c 'import os, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
for n in ("tekken_240718.json", "tekken_240911.json"):
    with open(os.path.join(sys.argv[2], n), "wb") as f:
        f.write(z.read("mistral_common/data/" + n))' "$WHL" "$DIR" || exit 1
fi
"$TEST" "$SHARED" "$DIR"; rc=$?
[ $rc -eq 0 ] || exit $rc

fail=0
T=$DIR/tekken_240911.json
info=$("$BIN" tokenizer info --tokenizer "$T" 2>&1)
for want in "tekken_240911" "131072" "specials: 1000" "<SPECIAL_999>"; do
  grep -qF -- "$want" <<<"$info" || { echo "FAIL: tokenizer info on tekken_240911.json lacks '$want':"; echo "$info" | head; fail=1; }
done
# mkshards build's framing (--bos/--eos default): Tekkenizer.encode(bos=True, eos=True)
ids=$(printf 'Hello world\n' | "$BIN" encode --tokenizer "$T" --bos default --eos default --ids-out - 2>/dev/null)
[ "$ids" = "[1,22177,4304,1010,2]" ] || { echo "FAIL: framed ids $ids, mistral_common [1, 22177, 4304, 1010, 2]"; fail=1; }
out=$(printf 'x\n' | "$BIN" encode --tokenizer "$T" --pattern o200k --ids-out /dev/null 2>&1); rc=$?
if [ $rc -ne 2 ] || ! grep -q "carries its own pre-tokenizer" <<<"$out"; then
  echo "FAIL: --pattern on a Tekken file: rc $rc: $out"; fail=1
fi
[ $fail -eq 0 ] && echo "cli checks: ok"
exit $fail
