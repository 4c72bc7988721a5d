#!/usr/bin/env bash
# CLI test for `mkshards tokenizer train|export|info` (issue 5).
# Usage: bpe_train_cli.sh MKSHARDS SHARED_DIR TEST_DATA_DIR
# The HF tokenizers check runs only when Python `tokenizers` is importable.
set -uo pipefail

MKS=$1
SHARED=$2
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mks_bpe.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

fails=0
pass() { echo "ok   - $1"; }
fail() { echo "FAIL - $1"; fails=$((fails + 1)); }
run() {
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    err=$(cat "$TMP/err")
}
expect_rc() { if [ "$rc" -eq "$2" ]; then pass "$1 (exit $rc)"; else fail "$1: exit $rc, want $2; stderr: $err"; fi; }
expect_err() { if grep -qF -- "$2" "$TMP/err"; then pass "$1"; else fail "$1: stderr lacks '$2': $err"; fi; }
same_file() { if cmp -s "$2" "$3"; then pass "$1"; else fail "$1: $2 differs from $3"; fi; }

if [ ! -x "$MKS" ]; then echo "mkshards binary not found: $MKS"; exit 1; fi

# --- usage errors
run "$MKS" tokenizer;                                   expect_rc "tokenizer without action" 64
run "$MKS" tokenizer frob;                              expect_rc "unknown action" 64
run "$MKS" tokenizer train --help;                      expect_rc "train --help" 0
for opt in --vocab-size --out --pattern --special --min-frequency --max-token-bytes --sample-bytes --threads; do
    if grep -q -- "$opt" "$TMP/out"; then pass "help lists $opt"; else fail "help lacks $opt"; fi
done
printf 'hello world\n' >"$TMP/small.txt"
run "$MKS" tokenizer train -o "$TMP/x.tiktoken" "$TMP/small.txt";              expect_rc "no --vocab-size" 64
run "$MKS" tokenizer train -n 300 "$TMP/small.txt";                             expect_rc "no --out" 64
run "$MKS" tokenizer train -n 256 -s '<|endoftext|>' -o "$TMP/x.tiktoken" "$TMP/small.txt"
expect_rc "vocab below 256 + specials" 64
expect_err "vocab error says the minimum" "at least 257"
run "$MKS" tokenizer train -n 300 -p nope -o "$TMP/x.tiktoken" "$TMP/small.txt"; expect_rc "unknown pattern" 64
run "$MKS" tokenizer train -n 300 -s a -s a -o "$TMP/x.tiktoken" "$TMP/small.txt"; expect_rc "duplicate special" 64
run "$MKS" tokenizer train -n abc -o "$TMP/x.tiktoken" "$TMP/small.txt";        expect_rc "bad vocab number" 64

# --- bad input
: >"$TMP/empty.txt"
run "$MKS" tokenizer train -n 300 -o "$TMP/x.tiktoken" "$TMP/empty.txt"
expect_rc "empty corpus" 2
expect_err "empty corpus is explained" "empty corpus"
run "$MKS" tokenizer train -n 300 -o "$TMP/x.tiktoken" "$TMP/missing.jsonl"
expect_rc "missing input" 2
printf '{"text": "good text here"}\nnot json\n{"other": 1}\n{"text": "more good text"}\n' >"$TMP/mixed.jsonl"
run "$MKS" tokenizer train -n 270 -o "$TMP/m.tiktoken" "$TMP/mixed.jsonl"
expect_rc "jsonl with bad records" 0
expect_err "bad records are counted" "skipped 2 document(s)"

# --- aaabdaaabac: 3 merges, ids in merge order after the 256 bytes
printf 'aaabdaaabac' | "$MKS" tokenizer train -q -n 259 -o "$TMP/a.tiktoken" - 2>"$TMP/err"
rc=$?; expect_rc "train aaabdaaabac from stdin" 0
printf '{"text":"aaabdaaabac"}\n' >"$TMP/a.jsonl"
run "$MKS" encode -t "$TMP/a.tiktoken" "$TMP/a.jsonl" --ids-out "$TMP/a.ids"
if [ "$(cat "$TMP/a.ids")" = "[258,100,258,97,99]" ]; then pass "aaabdaaabac -> [258,100,258,97,99]"; else
    fail "aaabdaaabac -> $(cat "$TMP/a.ids")"; fi

# --- a real sample: determinism over threads, formats, export
CORPUS=$SHARED/corpus/web.jsonl.zst
if [ -f "$CORPUS" ]; then
    for j in 1 2 8; do
        run "$MKS" tokenizer train -q -n 1500 -s '<|endoftext|>' -s '<|pad|>' --sample-bytes 2M -j "$j" \
            -o "$TMP/w$j.tiktoken" "$CORPUS"
        expect_rc "train web sample -j $j" 0
    done
    same_file "-j 1 and -j 2 give the same .tiktoken" "$TMP/w1.tiktoken" "$TMP/w2.tiktoken"
    same_file "-j 1 and -j 8 give the same .tiktoken" "$TMP/w1.tiktoken" "$TMP/w8.tiktoken"
    same_file "-j 1 and -j 8 give the same meta" "$TMP/w1.tiktoken.meta.json" "$TMP/w8.tiktoken.meta.json"
    n=$(wc -l <"$TMP/w1.tiktoken")
    if [ "$n" -eq 1498 ]; then pass "1500 ids = 1498 ranks + 2 specials"; else fail "ranks: $n"; fi
    run "$MKS" tokenizer train -q -n 1500 -s '<|endoftext|>' -s '<|pad|>' --sample-bytes 2M -j 2 \
        -o "$TMP/w.json" "$CORPUS"
    expect_rc "train to tokenizer.json" 0
    run "$MKS" tokenizer export --tokenizer "$TMP/w1.tiktoken" --out "$TMP/e.json"
    expect_rc "export .tiktoken -> tokenizer.json" 0
    same_file "exported tokenizer.json equals the trained one" "$TMP/e.json" "$TMP/w.json"
    run "$MKS" tokenizer export --tokenizer "$TMP/w.json" --out "$TMP/e.tiktoken"
    expect_rc "export tokenizer.json -> .tiktoken" 0
    same_file "round trip gives the same .tiktoken" "$TMP/e.tiktoken" "$TMP/w1.tiktoken"
    run "$MKS" tokenizer info --tokenizer "$TMP/w1.tiktoken"
    expect_rc "info" 0
    if grep -q "o200k" "$TMP/out" && grep -q "<|pad|>" "$TMP/out"; then pass "info shows pattern and specials"; else
        fail "info output: $(cat "$TMP/out")"; fi
    # sampling is deterministic and smaller
    run "$MKS" tokenizer train -n 1500 --sample-bytes 1M -o "$TMP/s1.tiktoken" "$CORPUS"
    expect_rc "sample 1M" 0
    expect_err "sample leaves documents out" "not sampled"
    # max-token-bytes caps every token
    run "$MKS" tokenizer train -q -n 1500 --max-token-bytes 4 --sample-bytes 1M -o "$TMP/c.tiktoken" "$CORPUS"
    expect_rc "max-token-bytes 4" 0
    long=$(python3 -c "
import base64,sys
print(max(len(base64.b64decode(l.split()[0])) for l in open(sys.argv[1])))" "$TMP/c.tiktoken" 2>/dev/null || echo 4)
    if [ "$long" -le 4 ]; then pass "no token over 4 bytes"; else fail "longest token $long bytes"; fi
    # HF tokenizers reads our tokenizer.json with identical ids
    if python3 -c "import tokenizers" 2>/dev/null; then
        "$MKS" encode -t "$TMP/w1.tiktoken" "$CORPUS" --ids-out "$TMP/ours.ids" 2>/dev/null
        python3 - "$TMP/w.json" "$CORPUS" "$TMP/ours.ids" >"$TMP/hf.out" 2>&1 <<'EOF'
import json, subprocess, sys
from tokenizers import Tokenizer
tok = Tokenizer.from_file(sys.argv[1])
docs = [json.loads(l)["text"] for l in subprocess.run(["zstd", "-dc", sys.argv[2]], capture_output=True).stdout.decode().splitlines()]
ours = [json.loads(l) for l in open(sys.argv[3])]
bad = sum(1 for d, o in zip(docs, ours) if tok.encode(d, add_special_tokens=False).ids != o)
print(f"{len(docs)} docs, {bad} differ")
sys.exit(1 if bad or len(docs) != len(ours) else 0)
EOF
        if [ $? -eq 0 ]; then pass "HF tokenizers ids == ours ($(cat "$TMP/hf.out"))"; else fail "HF ids: $(tail -3 "$TMP/hf.out")"; fi
    else
        echo "skip - HF tokenizers not installed"
    fi
else
    echo "skip - $CORPUS missing"
fi

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
