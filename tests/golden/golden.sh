#!/usr/bin/env bash
# Golden outputs of the dataset pipeline (issue 13's safety net): every
# byte `mkshards build` writes (shards, manifest.json, rejects.jsonl) for each
# --pack x --over-long x --threads x --part (with merge), `encode` ids,
# `lint --json` / `hist --json`, plus exit code and stderr of each command,
# reduced to sha256 digests. The digests in tests/data/golden/digests.txt were
# recorded from main before the build pipeline moved from tools/ into
# dataset/ (commit message says which); this test shows the move changed no
# byte.
#
# Usage: golden.sh MKSHARDS SHARED_DIR TEST_DATA_DIR [record]
#   check (default): recompute and compare with TEST_DATA_DIR/golden/digests.txt
#   record: write TEST_DATA_DIR/golden/digests.txt
# Inputs: the first lines of three files of SHARED_DIR/corpus (about 1.6 MB of
# JSONL, the slice's own digest is checked first) plus hostile records from
# TEST_DATA_DIR/bad. Exit 77 (skip) when the shared corpus or gpt2 vocabulary
# is missing. Runs in about 20-40 s on 2 cores.
set -uo pipefail

MKS=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
SHARED=$2
DATA=$3
MODE=${4:-check}
GOLDEN=$DATA/golden/digests.txt
for f in code web multi; do
    [ -f "$SHARED/corpus/$f.jsonl.zst" ] || { echo "skip: $SHARED/corpus/$f.jsonl.zst missing"; exit 77; }
done
[ -f "$SHARED/vocab/gpt2.tiktoken" ] || { echo "skip: no gpt2 vocabulary in $SHARED/vocab"; exit 77; }
command -v zstd >/dev/null || { echo "skip: no zstd binary"; exit 77; }

export MKS_VOCAB_DIR=$SHARED/vocab
unset MKS_CHECKPOINT_SECONDS
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mks_golden.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1
OUT=$TMP/digests.txt
: >"$OUT"

# ---- inputs (relative paths: the manifest and messages hold them)
mkdir in
zstd -dc "$SHARED/corpus/code.jsonl.zst" 2>/dev/null | head -n 60 >in/a-code.jsonl
zstd -dc "$SHARED/corpus/web.jsonl.zst" 2>/dev/null | head -n 150 >in/b-web.jsonl
zstd -dc "$SHARED/corpus/multi.jsonl.zst" 2>/dev/null | head -n 40 >in/c-multi.jsonl
cat "$DATA/bad/combined.jsonl" "$DATA/bad/utf8_invalid.jsonl" "$DATA/bad/nul_byte.jsonl" \
    "$DATA/bad/json_malformed.jsonl" >in/d-bad.jsonl
cp "$DATA/bad/zstd_truncated.jsonl.zst" in/e-trunc.jsonl.zst
(cd in && sha256sum ./*) | sed 's/^/input /' >>"$OUT"

h() { sha256sum | cut -c1-64; }
# run NAME CMD...: one line with exit code, stdout and stderr digests
run() {
    local name=$1
    shift
    "$@" >"$TMP/o" 2>"$TMP/e"
    local rc=$?
    echo "$name rc=$rc stdout=$(h <"$TMP/o") stderr=$(h <"$TMP/e")" >>"$OUT"
}
# files NAME DIR: one line per file of DIR
files() {
    local f
    for f in $(cd "$2" && ls -A | LC_ALL=C sort); do
        echo "$1 $f $(h <"$2/$f")" >>"$OUT"
    done
}

B=(build -t gpt2 -L 128 --val-fraction 0.1 --shard-tokens 64K -q)
for pack in concat bfd none; do
    for ol in truncate chunk drop; do
        for j in 1 2; do
            tag="build pack=$pack ol=$ol j=$j"
            run "$tag" "$MKS" "${B[@]}" --pack $pack --over-long $ol -j $j -o "o-$pack-$ol-$j" in
            files "$tag" "o-$pack-$ol-$j"
            for k in 1 2; do
                run "$tag part=$k/2" "$MKS" "${B[@]}" --pack $pack --over-long $ol -j $j --part $k/2 \
                    -o "p$k-$pack-$ol-$j" in
                files "$tag part=$k/2" "p$k-$pack-$ol-$j"
            done
            run "$tag merged" "$MKS" merge -q -o "m-$pack-$ol-$j" "p1-$pack-$ol-$j" "p2-$pack-$ol-$j"
            files "$tag merged" "m-$pack-$ol-$j"
            rm -rf "p1-$pack-$ol-$j" "p2-$pack-$ol-$j" "m-$pack-$ol-$j"
        done
    done
done
# variants: compression, no shuffle, small BFD window, stdin, a second run (up to date), a .txt input
run "build zstd" "$MKS" "${B[@]}" --zstd 3 --frame-rows 16 -j 2 -o o-zstd in
files "build zstd" o-zstd
run "build noshuffle bfdwin" "$MKS" "${B[@]}" --no-shuffle --pack bfd --bfd-window 8 --seed 7 -j 2 -o o-ns in
files "build noshuffle bfdwin" o-ns
run "build stdin" "$MKS" "${B[@]}" -j 2 -o o-stdin - <in/b-web.jsonl
files "build stdin" o-stdin
run "build again" "$MKS" build -t gpt2 -L 128 --val-fraction 0.1 --shard-tokens 64K --pack none --over-long drop \
    -j 2 -o o-none-drop-2 in
files "build again" o-none-drop-2
printf 'first paragraph\nline two\n\nsecond paragraph\n\n\nthird one\n' >txt.txt
run "build txt" "$MKS" build -t gpt2 -L 8 --doc-sep blank-line -q -o o-txt txt.txt
files "build txt" o-txt
run "build bad only" "$MKS" build -t gpt2 -L 64 -q -o o-rej in/d-bad.jsonl
# kill -9 once a checkpoint exists, then the same command again: the same bytes as an uninterrupted run
for pack in concat bfd; do
    R=(build -t gpt2 -L 128 --val-fraction 0.1 --shard-tokens 16K -q --pack $pack --batch-bytes 64K -j 2)
    MKS_CHECKPOINT_SECONDS=0 "$MKS" "${R[@]}" -o "o-res-$pack" in 2>/dev/null &
    pid=$!
    for _ in $(seq 1 400); do
        [ -f "o-res-$pack/build.ckpt" ] && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.005
    done
    kill -9 $pid 2>/dev/null
    wait $pid 2>/dev/null
    run "build resumed $pack" "$MKS" "${R[@]}" -o "o-res-$pack" in
    files "build resumed $pack" "o-res-$pack"
done
rm -rf o-*

# ---- encode, lint, hist
for j in 1 2; do
    run "encode j=$j" "$MKS" encode -t gpt2 -j $j --ids-out "ids-$j" in
    echo "encode j=$j ids $(h <"ids-$j")" >>"$OUT"
    run "encode special j=$j" "$MKS" encode -t gpt2 -j $j --allow-special all --batch-docs 7 --ids-out - in
    run "lint j=$j" "$MKS" lint -t gpt2 -L 128 --json -j $j in
    run "hist j=$j" "$MKS" hist -t gpt2 -L 128 --json -j $j in
done
run "lint nobytes" "$MKS" lint --json -j 2 in
run "lint+hist" "$MKS" lint -t gpt2 -L 128 --json --hist -j 2 in

if [ "$MODE" = record ]; then
    mkdir -p "$(dirname "$GOLDEN")"
    cp "$OUT" "$GOLDEN"
    echo "recorded $(wc -l <"$OUT") digests in $GOLDEN"
    exit 0
fi
if ! [ -f "$GOLDEN" ]; then
    echo "FAIL - no $GOLDEN (run: tests/golden/record.sh)"
    exit 1
fi
if grep '^input ' "$OUT" | diff -q - <(grep '^input ' "$GOLDEN") >/dev/null; then :; else
    echo "skip: the corpus slice differs from the one the digests were recorded from"
    grep '^input ' "$OUT" | diff - <(grep '^input ' "$GOLDEN")
    exit 77
fi
if diff -u "$GOLDEN" "$OUT" >"$TMP/diff"; then
    echo "ok   - $(wc -l <"$OUT") golden digests identical"
    exit 0
fi
echo "FAIL - outputs differ from $GOLDEN:"
head -n 80 "$TMP/diff"
exit 1
