#!/usr/bin/env bash
# record.sh MKSHARDS LLMTRAIN - (re)make tests/data/golden_train from the
# current build: the inputs (a 512-token tokenizer trained on
# samples/tiny.jsonl, shard sets of its first 16 documents packed concat and
# bfd, L=33) and expected.txt (runs.sh's summary). Recorded on main at
# 11e4b6f (before the trainer's backend split, issue 13) with a Release,
# CUDA OFF build; check.sh compares every later build with it. The backend
# split (5ce36db, 6c156ad) reproduced that record bit for bit. Re-recorded
# once since, in 7a5c981 (issue 16): the CPU backend now sums the
# micro-batch gradients of a step in order (data parallel = one process),
# which changes the accum / accum_docmask / resume runs in the last bits.
# Only re-record on purpose (a change that is meant to alter the numbers),
# and say so in the commit.
set -eu
MKS=$(realpath "$1")
LLM=$(realpath "$2")
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
D=$ROOT/tests/data/golden_train
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
rm -rf "$D/inputs"
mkdir -p "$D/inputs"
cd "$T"
"$MKS" tokenizer train --vocab-size 512 --out tok.tiktoken -s '<|endoftext|>' -q "$ROOT/samples/tiny.jsonl"
head -16 "$ROOT/samples/tiny.jsonl" >docs.jsonl
"$MKS" build -t tok.tiktoken -L 33 --pack concat -o "$D/inputs/concat" --val-fraction 0.05 -q docs.jsonl
"$MKS" build -t tok.tiktoken -L 33 --pack bfd -o "$D/inputs/bfd" --val-fraction 0.05 -q docs.jsonl
cp tok.tiktoken tok.tiktoken.meta.json "$D/inputs/"
rm -f "$D/inputs"/*/rejects.jsonl
bash "$ROOT/tests/golden_train/runs.sh" "$LLM" "$D/inputs" "$T/out"
cp "$T/out/summary.txt" "$D/expected.txt"
(cd "$D" && find inputs -type f | LC_ALL=C sort | xargs sha256sum >inputs.sha256)
echo "recorded $D/expected.txt ($(wc -l <"$D/expected.txt") lines)"
