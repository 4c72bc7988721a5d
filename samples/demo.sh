#!/usr/bin/env bash
# Demo of what mkshards can do today, on the sample corpus in samples/.
# Run via `make demo` (builds first) or directly: bash samples/demo.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
MKS=${MKSHARDS:-build/tools/mkshards}
VOCAB=${MKSHARDS_VOCAB_DIR:-$(cd "$ROOT/.." && pwd)/shared/vocab}
OUT=${DEMO_OUT:-$ROOT/build/demo}

for enc in gpt2 cl100k_base o200k_base; do
    if [ ! -f "$VOCAB/$enc.tiktoken" ]; then
        echo "demo: $VOCAB/$enc.tiktoken not found: the demo needs the shared vocabularies" \
             "(../shared/vocab next to the repository, or set MKSHARDS_VOCAB_DIR)" >&2
        exit 2
    fi
done
if [ ! -x "$MKS" ]; then
    echo "demo: building mkshards first (make build)"
    make -C "$ROOT" build >/dev/null
fi
mkdir -p "$OUT"
section() { printf '\n=== %s ===\n' "$*"; }

section "mkshards $("$MKS" --version | awk '{print $2}')"
"$MKS" --help | sed -n '/^Commands:/,/^$/p'

section "Stage 1 (available now): encode / decode with real vocabularies"
echo "inputs: samples/tiny.jsonl ($(wc -l <samples/tiny.jsonl) documents, $(wc -c <samples/tiny.jsonl) bytes)," \
     "samples/notes.txt ($(wc -c <samples/notes.txt) bytes)"
echo "vocabularies from: $VOCAB"

# Expected decode output: each document's text followed by a newline.
python3 -c 'import json,sys
for l in open(sys.argv[1], encoding="utf-8"):
    sys.stdout.write(json.loads(l)["text"] + "\n")' samples/tiny.jsonl >"$OUT/tiny.expected.txt"
{ cat samples/notes.txt; echo; } >"$OUT/notes.expected.txt"

printf '\n%-12s %-10s %6s %9s %9s %11s  %s\n' encoding input docs bytes tokens bytes/token round-trip
all_ok=1
for enc in gpt2 cl100k_base o200k_base; do
    rank_file=$VOCAB/$enc.tiktoken
    for input in tiny.jsonl notes.txt; do
        stem=${input%%.*}
        "$MKS" encode --tokenizer "$rank_file" --stats "samples/$input" --ids-out "$OUT/$stem.$enc.ids" \
            2>"$OUT/stats.txt"
        docs=$(sed -n 's/.*: \([0-9]*\) docs, \([0-9]*\) bytes, \([0-9]*\) tokens.*/\1/p' "$OUT/stats.txt")
        bytes=$(sed -n 's/.*: \([0-9]*\) docs, \([0-9]*\) bytes, \([0-9]*\) tokens.*/\2/p' "$OUT/stats.txt")
        tokens=$(sed -n 's/.*: \([0-9]*\) docs, \([0-9]*\) bytes, \([0-9]*\) tokens.*/\3/p' "$OUT/stats.txt")
        "$MKS" decode --tokenizer "$rank_file" --ids "$OUT/$stem.$enc.ids" >"$OUT/$stem.$enc.decoded.txt"
        if cmp -s "$OUT/$stem.$enc.decoded.txt" "$OUT/$stem.expected.txt"; then rt="exact"; else rt="MISMATCH"; all_ok=0; fi
        printf '%-12s %-10s %6s %9s %9s %11s  %s\n' "$enc" "$input" "$docs" "$bytes" "$tokens" \
            "$(awk -v b="$bytes" -v t="$tokens" 'BEGIN{printf "%.2f", (t ? b/t : 0)}')" "$rt"
    done
done

section "First document of samples/tiny.jsonl, cl100k_base ids (first 24)"
head -1 "$OUT/tiny.cl100k_base.ids" | cut -d, -f1-24 | sed 's/$/,...]/'
echo "decoded back: $(head -c 120 "$OUT/tiny.expected.txt")..."

section "Names instead of paths"
echo "\$ MKSHARDS_VOCAB_DIR=$VOCAB mkshards encode -t o200k_base samples/notes.txt --ids-out - | head -c 80"
MKSHARDS_VOCAB_DIR=$VOCAB "$MKS" encode -t o200k_base samples/notes.txt --ids-out - | head -c 80; echo "..."

available() { ! "$MKS" "$1" --help 2>&1 | grep -qi "not implemented yet"; }
if available lint; then
    section "Stage 2: lint (checks the corpus before training; exit 1 = findings)"
    echo "\$ mkshards lint -t gpt2 --seq-len 1024 samples/tiny.jsonl"
    set +e
    "$MKS" lint -t "$VOCAB/gpt2.tiktoken" --seq-len 1024 samples/tiny.jsonl 2>&1 | head -25
    set -e
fi
if available hist; then
    section "Stage 2: hist (document lengths in tokens vs a 1024-token context)"
    echo "\$ mkshards hist -t gpt2 --seq-len 1024 samples/tiny.jsonl"
    "$MKS" hist -t "$VOCAB/gpt2.tiktoken" --seq-len 1024 samples/tiny.jsonl 2>&1 | head -30
fi

section "Later stages"
for sub in lint hist tokenizer build; do
    if ! available "$sub"; then
        echo "mkshards $sub: not implemented yet - comes in a later stage"
    elif [ "$sub" != lint ] && [ "$sub" != hist ]; then
        echo "mkshards $sub: available in this build (see 'mkshards $sub --help'); not demonstrated here yet"
    fi
done
echo "train (tiny GPT on samples/): comes in a later stage (train/, kernels/)"

echo
if [ "$all_ok" = 1 ]; then echo "demo: all round trips exact"; else echo "demo: round-trip MISMATCH (see above)"; exit 1; fi
