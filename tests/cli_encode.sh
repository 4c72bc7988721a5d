#!/usr/bin/env bash
# CLI test for `mkshards encode` / `mkshards decode` (exit codes, messages, golden ids).
# Usage: cli_encode.sh MKSHARDS SHARED_DIR TEST_DATA_DIR
# Golden files come from tests/data/cli/regen.py (Python tiktoken); this script needs no Python.
set -uo pipefail

MKS=$1
SHARED=$2
DATA=$3/cli
VOCAB=$SHARED/vocab
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mks_cli.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

fails=0
pass() { echo "ok   - $1"; }
fail() { echo "FAIL - $1"; fails=$((fails + 1)); }

# run CMD... : sets $rc, $out (stdout), $err (stderr)
run() {
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    out=$(cat "$TMP/out")
    err=$(cat "$TMP/err")
}
expect_rc() { # NAME WANT
    if [ "$rc" -eq "$2" ]; then pass "$1 (exit $rc)"; else fail "$1: exit $rc, want $2; stderr: $err"; fi
}
expect_err() { # NAME SUBSTRING
    if grep -qF -- "$2" "$TMP/err"; then pass "$1"; else fail "$1: stderr lacks '$2': $err"; fi
}
same_file() { # NAME GOT WANT
    if cmp -s "$2" "$3"; then pass "$1"; else
        fail "$1: $2 differs from $3"
        diff <(head -c 2000 "$2") <(head -c 2000 "$3") | head -20
    fi
}

if [ ! -x "$MKS" ]; then echo "mkshards binary not found: $MKS"; exit 1; fi
if [ ! -f "$VOCAB/gpt2.tiktoken" ]; then echo "SKIP: no $VOCAB/gpt2.tiktoken"; exit 77; fi

# --- help, version, usage errors
run "$MKS" --help;                         expect_rc "mkshards --help" 0
run "$MKS" --version;                      expect_rc "mkshards --version" 0
run "$MKS";                                expect_rc "mkshards without a command" 64
run "$MKS" frobnicate;                     expect_rc "unknown command" 64
expect_err "unknown command is named" "frobnicate"
for sub in encode decode; do
    run "$MKS" $sub --help;                expect_rc "$sub --help" 0
    if grep -q -- "--tokenizer" "$TMP/out"; then pass "$sub --help lists --tokenizer"; else fail "$sub --help lacks --tokenizer"; fi
    run "$MKS" $sub --no-such-option -t gpt2
    expect_rc "$sub unknown option" 64
    expect_err "$sub unknown option is named" "--no-such-option"
    expect_err "$sub unknown option hint" "--help"
done
for opt in --input --field --threads --pattern --allow-special --doc-sep --ids-out --stats; do
    if "$MKS" encode --help | grep -q -- "$opt"; then pass "encode --help lists $opt"; else fail "encode --help lacks $opt"; fi
done
run "$MKS" encode --ids-out "$TMP/x.ids" "$DATA/small.jsonl"; expect_rc "encode without --tokenizer" 64
run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" "$DATA/small.jsonl"; expect_rc "encode without --ids-out" 64
run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" --threads abc --ids-out "$TMP/x.ids" "$DATA/small.jsonl"
expect_rc "encode --threads abc" 64
run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" --doc-sep paragraph --ids-out "$TMP/x.ids" "$DATA/small.jsonl"
expect_rc "encode --doc-sep paragraph" 64
run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" --ids-out
expect_rc "encode --ids-out without value" 64

# --- missing files
run "$MKS" encode -t "$TMP/nope.tiktoken" --ids-out "$TMP/x.ids" "$DATA/small.jsonl"
expect_rc "missing tokenizer file" 2
expect_err "missing tokenizer file is named" "nope.tiktoken"
run "$MKS" decode -t "$TMP/nope.tiktoken" --ids "$DATA/small.gpt2.ids"
expect_rc "decode: missing tokenizer file" 2
expect_err "decode: missing tokenizer file is named" "nope.tiktoken"
run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" --ids-out "$TMP/x.ids" "$TMP/missing-input.jsonl"
expect_rc "missing input file" 2
expect_err "missing input file is named" "missing-input.jsonl"
run "$MKS" decode -t "$VOCAB/gpt2.tiktoken" --ids "$TMP/missing.ids"
expect_rc "decode: missing ids file" 2
expect_err "decode: missing ids file is named" "missing.ids"

# --- golden ids (gpt2 by path, by name, threads, zstd, stdin)
run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" --input "$DATA/small.jsonl" --ids-out "$TMP/a.ids"
expect_rc "encode small.jsonl (gpt2 by path)" 0
same_file "gpt2 ids equal tiktoken's" "$TMP/a.ids" "$DATA/small.gpt2.ids"

MKS_VOCAB_DIR=$VOCAB run "$MKS" encode --tokenizer gpt2 "$DATA/small.jsonl" --ids-out "$TMP/b.ids"
expect_rc "encode by name (MKS_VOCAB_DIR)" 0
same_file "gpt2 by name equals tiktoken's" "$TMP/b.ids" "$DATA/small.gpt2.ids"

# --- one prefix (tokenizer/mks_env.h): MKS_VOCAB_DIR is read without a word; the old
# MKSHARDS_VOCAB_DIR still works for one release with one warning line per process (build reads
# the folder twice: tk_load and the output check's ds_tokenizer_sources); both set: the new one wins
envwarn() { grep -c 'warning: environment variable MKSHARDS_VOCAB_DIR' "$TMP/err"; }
if [ "$(envwarn)" = 0 ]; then pass "MKS_VOCAB_DIR: no warning"; else fail "MKS_VOCAB_DIR warned: $err"; fi
run env -u MKS_VOCAB_DIR MKSHARDS_VOCAB_DIR="$VOCAB" "$MKS" encode --tokenizer gpt2 "$DATA/small.jsonl" --ids-out "$TMP/c.ids"
expect_rc "encode by name (old MKSHARDS_VOCAB_DIR)" 0
same_file "old name: same ids" "$TMP/c.ids" "$DATA/small.gpt2.ids"
expect_err "old name: the warning names the new one" "MKSHARDS_VOCAB_DIR is deprecated: set MKS_VOCAB_DIR instead"
run env -u MKS_VOCAB_DIR MKSHARDS_VOCAB_DIR="$VOCAB" "$MKS" build -q -t gpt2 -L 16 -o "$TMP/envset" "$DATA/small.jsonl"
expect_rc "build by name (old MKSHARDS_VOCAB_DIR)" 0
if [ "$(envwarn)" = 1 ] && [ "$(wc -l <"$TMP/err")" = 1 ]; then pass "old name: one warning line in a process that reads it twice"
else fail "old name: $(envwarn) warnings: $err"; fi
run env MKSHARDS_VOCAB_DIR="$TMP/nowhere" MKS_VOCAB_DIR="$VOCAB" "$MKS" encode --tokenizer gpt2 "$DATA/small.jsonl" --ids-out "$TMP/d.ids"
expect_rc "both names set: the new one is read" 0
same_file "both names: same ids" "$TMP/d.ids" "$DATA/small.gpt2.ids"
expect_err "both names: the old one is said to be ignored" "MKSHARDS_VOCAB_DIR is ignored: MKS_VOCAB_DIR is set"

run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" --threads 1 --batch-docs 3 "$DATA/small.jsonl" --ids-out "$TMP/t1.ids"
expect_rc "encode --threads 1" 0
run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" --threads 2 --batch-docs 3 "$DATA/small.jsonl" --ids-out "$TMP/t2.ids"
expect_rc "encode --threads 2" 0
same_file "--threads 1 and --threads 2 agree" "$TMP/t1.ids" "$TMP/t2.ids"
same_file "--threads 2 equals tiktoken's" "$TMP/t2.ids" "$DATA/small.gpt2.ids"

run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" --threads 2 --batch-bytes 64 "$DATA/small.jsonl" --ids-out "$TMP/bb.ids"
expect_rc "encode --batch-bytes 64 (one document per batch)" 0
same_file "tiny batches give the same ids" "$TMP/bb.ids" "$DATA/small.gpt2.ids"

if command -v zstd >/dev/null; then
    zstd -q -c "$DATA/small.jsonl" >"$TMP/small.jsonl.zst"
    run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" "$TMP/small.jsonl.zst" --ids-out "$TMP/z.ids"
    expect_rc "encode zstd input" 0
    same_file "zstd input gives the same ids" "$TMP/z.ids" "$DATA/small.gpt2.ids"
else
    fail "zstd CLI not installed (make deps installs it)"
fi

"$MKS" encode -t "$VOCAB/gpt2.tiktoken" --ids-out - <"$DATA/small.jsonl" >"$TMP/s.ids" 2>"$TMP/err"
rc=$?; err=$(cat "$TMP/err")
expect_rc "encode stdin -> stdout" 0
same_file "stdin/stdout ids equal tiktoken's" "$TMP/s.ids" "$DATA/small.gpt2.ids"

run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" --doc-sep line "$DATA/lines.txt" --ids-out "$TMP/l.ids"
expect_rc "encode --doc-sep line" 0
same_file "--doc-sep line ids equal tiktoken's" "$TMP/l.ids" "$DATA/lines.gpt2.ids"

run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" --stats "$DATA/small.jsonl" --ids-out "$TMP/st.ids"
expect_rc "encode --stats" 0
expect_err "--stats prints a summary" "tokens"

# --- round trip
run "$MKS" decode -t "$VOCAB/gpt2.tiktoken" --ids "$TMP/a.ids"
expect_rc "decode" 0
"$MKS" decode -t "$VOCAB/gpt2.tiktoken" --ids "$TMP/a.ids" >"$TMP/rt.txt" 2>/dev/null
same_file "encode|decode round trip equals the input text" "$TMP/rt.txt" "$DATA/small.txt"
"$MKS" encode -t "$VOCAB/gpt2.tiktoken" "$DATA/small.jsonl" --ids-out - 2>/dev/null |
    "$MKS" decode -t "$VOCAB/gpt2.tiktoken" >"$TMP/rt2.txt" 2>/dev/null
same_file "encode - | decode (pipe) round trip" "$TMP/rt2.txt" "$DATA/small.txt"
"$MKS" decode -t "$VOCAB/gpt2.tiktoken" "$DATA/lines.gpt2.ids" >"$TMP/rt3.txt" 2>/dev/null
same_file "decode of line ids gives the lines back" "$TMP/rt3.txt" "$DATA/lines.txt"

# --- decode errors
printf '[15496,11]\n[15496,99999999]\n' >"$TMP/bad_range.ids"
run "$MKS" decode -t "$VOCAB/gpt2.tiktoken" --ids "$TMP/bad_range.ids"
expect_rc "decode id out of range" 2
expect_err "out-of-range message names the line" ":2:"
expect_err "out-of-range message names the id" "99999999"
printf '[1,2\n' >"$TMP/bad_syntax.ids"
run "$MKS" decode -t "$VOCAB/gpt2.tiktoken" --ids "$TMP/bad_syntax.ids"
expect_rc "decode malformed line" 2
expect_err "malformed-line message names the line" ":1:"

# --- unusable records are skipped with file:line, exit 0; nothing usable -> exit 2
printf '{"text": "good one"}\n{"text": broken\n{"other": "x"}\n{"text": "good two"}\n' >"$TMP/mixed.jsonl"
run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" "$TMP/mixed.jsonl" --ids-out "$TMP/m.ids"
expect_rc "encode skips bad records" 0
expect_err "bad record warning has file:line" "mixed.jsonl:2"
expect_err "missing-field warning has file:line" "mixed.jsonl:3"
if [ "$(wc -l <"$TMP/m.ids")" -eq 2 ]; then pass "two good records encoded"; else fail "want 2 lines in m.ids: $(cat "$TMP/m.ids")"; fi
printf '{"text": broken\n' >"$TMP/allbad.jsonl"
run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" "$TMP/allbad.jsonl" --ids-out "$TMP/ab.ids"
expect_rc "encode with nothing usable" 2

# --- --field and --allow-special
printf '{"body": {"t": "Hello, world!"}}\n' >"$TMP/nested.jsonl"
run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" --field body.t "$TMP/nested.jsonl" --ids-out "$TMP/n.ids"
expect_rc "encode --field body.t" 0
if [ "$(cat "$TMP/n.ids")" = "[15496,11,995,0]" ]; then pass "--field nested ids"; else fail "--field nested ids: $(cat "$TMP/n.ids")"; fi
printf '{"text": "a<|endoftext|>b"}\n' >"$TMP/sp.jsonl"
run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" --allow-special all "$TMP/sp.jsonl" --ids-out "$TMP/sp.ids"
expect_rc "encode --allow-special all" 0
if grep -q "50256" "$TMP/sp.ids"; then pass "--allow-special maps <|endoftext|> to 50256"; else fail "--allow-special: $(cat "$TMP/sp.ids")"; fi
run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" "$TMP/sp.jsonl" --ids-out "$TMP/sp0.ids"
if grep -q "50256" "$TMP/sp0.ids"; then fail "without --allow-special the special text must stay ordinary"; else pass "specials are ordinary text by default"; fi
run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" --allow-special '<|endoftext|>' "$TMP/sp.jsonl" --ids-out "$TMP/sp2.ids"
expect_rc "encode --allow-special '<|endoftext|>'" 0
same_file "--allow-special by name equals 'all' for gpt2" "$TMP/sp2.ids" "$TMP/sp.ids"
run "$MKS" help encode;                    expect_rc "mkshards help encode" 0
run "$MKS" encode -t "$VOCAB/gpt2.tiktoken" --allow-special '<|nope|>' "$TMP/sp.jsonl" --ids-out "$TMP/sp1.ids"
expect_rc "encode --allow-special unknown token" 64

echo

# ---- table images: this binary (a static executable where the build makes one, with
# no dladdr) writes one on the first load and takes it, unchanged, on the next
mkdir -m 700 "$TMP/cache"
MKS_CACHE_DIR="$TMP/cache" "$MKS" encode -t "$VOCAB/gpt2.tiktoken" --ids-out "$TMP/i1.ids" "$DATA/small.jsonl" 2>/dev/null
img=$(find "$TMP/cache" -name '*.img' | head -1)
if [ -n "$img" ]; then
    pass "first load writes a table image"
    before=$(stat -c '%i %y' "$img")
    MKS_CACHE_DIR="$TMP/cache" "$MKS" encode -t "$VOCAB/gpt2.tiktoken" --ids-out "$TMP/i2.ids" "$DATA/small.jsonl" 2>/dev/null
    if [ "$(stat -c '%i %y' "$img" 2>/dev/null)" = "$before" ] && cmp -s "$TMP/i1.ids" "$TMP/i2.ids"; then
        pass "second load takes the image (not rewritten), same ids"
    else
        fail "second load rewrote the image or gave other ids"
    fi
else
    fail "no table image written in $TMP/cache"
fi
if [ "$fails" -ne 0 ]; then echo "$fails check(s) failed"; exit 1; fi
echo "all checks passed"
