#!/usr/bin/env bash
# Demo on the sample corpus in samples/: encode/decode with real vocabularies,
# then the whole pipeline - train a tokenizer, lint, hist, build shards, plan
# memory, train a tiny GPT for 300 steps on the CPU and print a sample.
# Run via `make demo` (builds first) or directly: bash samples/demo.sh
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
MKS=${MKSHARDS:-build/tools/mkshards}
VOCAB=${MKS_VOCAB_DIR:-$(cd "$ROOT/.." && pwd)/shared/vocab}
OUT=${DEMO_OUT:-$ROOT/build/demo}

have_vocab=1
for enc in gpt2 cl100k_base o200k_base; do
    if [ ! -f "$VOCAB/$enc.tiktoken" ]; then
        echo "demo: $VOCAB/$enc.tiktoken not found: stage 1 (encode/decode with the upstream" \
             "vocabularies) is skipped; put ../shared/vocab next to the repository or set MKS_VOCAB_DIR." \
             "The pipeline below trains its own tokenizer and still runs." >&2
        have_vocab=0
        break
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

all_ok=1
available() { ! "$MKS" "$1" --help 2>&1 | grep -qi "not implemented yet"; }
if [ "$have_vocab" = 1 ]; then
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
echo "\$ MKS_VOCAB_DIR=$VOCAB mkshards encode -t o200k_base samples/notes.txt --ids-out - | head -c 80"
MKS_VOCAB_DIR=$VOCAB "$MKS" encode -t o200k_base samples/notes.txt --ids-out - | head -c 80; echo "..."

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

fi

# ---------------------------------------------------------------- the whole pipeline
LLM=${LLMTRAIN:-$(dirname "$MKS")/llmtrain/llmtrain}
if ! available tokenizer || ! available build || [ ! -x "$LLM" ]; then
    section "Pipeline (tokenizer -> lint -> hist -> shards -> train)"
    echo "skipped: needs mkshards tokenizer + build and llmtrain in this build"
else
    # Small and quick on 2 cores: a tiny GPT (2 layers, C=64) on 64-token rows.
    # One kernel thread is fastest for matrices this small.
    export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
    P=$OUT/pipeline
    rm -rf "$P"
    mkdir -p "$P"
    section "Pipeline 1/6: train a tokenizer on samples/ (byte-level BPE, up to 2048 ids)"
    echo "\$ mkshards tokenizer train --vocab-size 2048 -s '<|endoftext|>' --out tok.tiktoken samples/tiny.jsonl"
    "$MKS" tokenizer train --vocab-size 2048 -s '<|endoftext|>' --out "$P/tok.tiktoken" -q samples/tiny.jsonl 2>&1 |
        sed 's/^/  /'
    "$MKS" tokenizer info --tokenizer "$P/tok.tiktoken" 2>&1 | head -6 | sed 's/^/  /'

    section "Pipeline 2/6: lint with the new tokenizer (64-token rows)"
    set +e
    "$MKS" lint -t "$P/tok.tiktoken" --seq-len 64 samples/tiny.jsonl 2>&1 | head -12
    set -e

    section "Pipeline 3/6: hist (document lengths vs the 64-token context)"
    "$MKS" hist -t "$P/tok.tiktoken" --seq-len 64 samples/tiny.jsonl 2>&1 | head -20

    section "Pipeline 4/6: build shards (rows of 65 tokens = 64 inputs + the next-token target, 5% validation)"
    echo "\$ mkshards build -t tok.tiktoken -L 65 --val-fraction 0.05 -o shards samples/tiny.jsonl"
    "$MKS" build -t "$P/tok.tiktoken" -L 65 --val-fraction 0.05 -o "$P/shards" -q samples/tiny.jsonl
    python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))
s=m.get("splits", m)
print("  manifest:", ", ".join("%s %s rows" % (k, v["rows"]) for k, v in s.items() if isinstance(v, dict) and "rows" in v))' \
        "$P/shards/manifest.json" 2>/dev/null || true
    ls -l "$P/shards" | sed 's/^/  /'

    train_args=(--data "$P/shards" --model tiny --seq-len 64 --token-budget 512 --batch-tokens 1024)
    section "Pipeline 5/6: memory plan (nothing is allocated; exit 3 would mean it cannot fit)"
    echo "\$ llmtrain --plan ${train_args[*]//$P\//} --mem-budget 64M"
    "$LLM" --plan "${train_args[@]}" --mem-budget 64M
    echo "\$ llmtrain --plan --model d12 --seq-len 1024 --token-budget 16384 --batch-tokens 524288 --device cuda --precision bf16 --mem-budget 80GiB"
    "$LLM" --plan --model d12 --seq-len 1024 --token-budget 16384 --batch-tokens 524288 --device cuda --precision bf16 \
        --mem-budget 80GiB | sed -n '1,3p;/total/,$p'

    section "Pipeline 6/6: train the tiny GPT for 300 steps on the CPU, then sample"
    echo "\$ llmtrain ${train_args[*]//$P\//} --steps 300 --lr 3e-3 --val-every 100 --log train.jsonl --ckpt-dir ckpt --sample 80 --tokenizer tok.tiktoken"
    "$LLM" "${train_args[@]}" --steps 300 --lr 3e-3 --val-every 100 --log-every 25 --log "$P/train.jsonl" \
        --ckpt-dir "$P/ckpt" --sample 80 --tokenizer "$P/tok.tiktoken"
    python3 - "$P/train.jsonl" <<'PYEOF'
import json, sys
steps = [json.loads(l) for l in open(sys.argv[1])]
loss = [s["loss"] for s in steps if "loss" in s]
first, last = sum(loss[:10]) / 10, sum(loss[-10:]) / 10
print("loss: first 10 steps %.3f, last 10 steps %.3f (%d steps logged)" % (first, last, len(loss)))
if not last < first - 1.0:
    print("demo: loss did not fall"); sys.exit(1)
PYEOF
    if [ "$(nproc)" -gt 0 ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi >/dev/null 2>&1; then
        echo "(a GPU is present: the CUDA backend would run this with --device cuda)"
    fi
fi

echo
if [ "$all_ok" = 1 ]; then echo "demo: all round trips exact"; else echo "demo: round-trip MISMATCH (see above)"; exit 1; fi
