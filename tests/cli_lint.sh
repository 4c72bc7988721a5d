#!/usr/bin/env bash
# cli_lint.sh MKSHARDS SHARED_DIR TEST_DATA - mkshards lint / hist from the
# command line: exit codes 0/1/2/64, --json shape, stdin, --svg, help.
set -u
M=$1; SHARED=$2; DATA=$3
export MKS_VOCAB_DIR=$SHARED/vocab
fail=0
t() { # t WANT_RC DESC CMD...
    local want=$1 desc=$2; shift 2
    "$@" > /tmp/cli_lint.$$.out 2> /tmp/cli_lint.$$.err
    local rc=$?
    if [ "$rc" != "$want" ]; then
        echo "FAIL: $desc: exit $rc, expected $want"; head -5 /tmp/cli_lint.$$.out /tmp/cli_lint.$$.err; fail=1
    else
        echo "ok: $desc"
    fi
}
t 0 "clean corpus exits 0" "$M" lint "$DATA/clean"
grep -q "clean: no findings" /tmp/cli_lint.$$.out || { echo "FAIL: clean message"; fail=1; }
t 0 "info only (bom) exits 0" "$M" lint "$DATA/bad/bom.txt"
t 1 "warnings exit 1" "$M" lint "$DATA/bad/duplicate.jsonl"
t 2 "errors exit 2" "$M" lint "$DATA/bad/combined.jsonl"
t 2 "corrupt zstd exits 2" "$M" lint "$DATA/bad/zstd_truncated.jsonl.zst"
t 2 "missing input exits 2" "$M" lint /nonexistent/input.jsonl
t 64 "unknown option exits 64" "$M" lint --no-such-option "$DATA/clean"
t 64 "no input exits 64" "$M" lint
t 64 "hist without tokenizer exits 64" "$M" hist "$DATA/clean"
t 0 "lint --help" "$M" lint --help
grep -q "Exit codes" /tmp/cli_lint.$$.out || { echo "FAIL: help text"; fail=1; }
t 2 "json report" "$M" lint --json --max-examples 2 "$DATA/bad/combined.jsonl"
if command -v python3 > /dev/null; then
    python3 - /tmp/cli_lint.$$.out <<'PY' || fail=1
import json, sys
d = json.load(open(sys.argv[1]))
rules = {f["rule"]: f for f in d["findings"]}
assert d["exit"] == 2 and d["errors"] == 3, d
e = rules["duplicate"]["examples"][0]
assert e["line"] == 4 and e["offset"] == 96 and e["file"].endswith("combined.jsonl"), e
for f in d["findings"]:
    assert f["severity"] in ("error", "warning", "info") and f["count"] >= 1
    for e in f["examples"]:
        assert {"file", "line", "offset"} <= set(e), e
print("ok: json shape")
PY
fi
t 1 "stdin" bash -c "cat '$DATA/bad/duplicate.jsonl' | '$M' lint -"
if [ -f "$SHARED/vocab/gpt2.tiktoken" ]; then
    t 1 "lint with tokenizer + L" "$M" lint -t gpt2 -L 64 "$DATA/bad/doc_too_long_tokens.jsonl"
    grep -q "doc-too-long" /tmp/cli_lint.$$.out || { echo "FAIL: doc-too-long not reported"; fail=1; }
    svg=/tmp/cli_lint.$$.svg
    t 0 "hist with svg" "$M" hist -t gpt2 -L 32 --svg "$svg" "$DATA/clean"
    grep -q "pack" /tmp/cli_lint.$$.out || { echo "FAIL: hist policies"; fail=1; }
    grep -q "<svg" "$svg" || { echo "FAIL: svg"; fail=1; }
    t 0 "hist --json" "$M" hist -t gpt2 -L 32 --json -j 1 "$DATA/clean"
    cp /tmp/cli_lint.$$.out /tmp/cli_lint.$$.j1
    t 0 "hist --json 2 threads" "$M" hist -t gpt2 -L 32 --json -j 2 "$DATA/clean"
    cmp -s /tmp/cli_lint.$$.out /tmp/cli_lint.$$.j1 || { echo "FAIL: hist output depends on threads"; fail=1; }
    t 2 "lint --hist one pass" "$M" lint -t gpt2 -L 32 --hist --json "$DATA/bad/combined.jsonl"
    grep -q '"hist":' /tmp/cli_lint.$$.out || { echo "FAIL: lint --hist json"; fail=1; }
    rm -f "$svg" /tmp/cli_lint.$$.j1
fi
rm -f /tmp/cli_lint.$$.out /tmp/cli_lint.$$.err
exit $fail
