#!/usr/bin/env bash
# Per-document tokenizer limits on the command line (issue 32, items 1-3).
# hostile_tk_gen writes the crafted tokenizers (tests/hostile_tk.h):
#  - a Split regex (?:x+x+)+y|. whose 120 KB document took over 60 s: encode,
#    build, lint and hist refuse that document in well under the time bound;
#  - one bad document among good ones (the regex, and "a" -> 1 MiB through a
#    Replace normalizer, a Precompiled normalizer and a SentencePiece
#    normalizer): encode exits 0 and writes the good documents' ids exactly as
#    a run without the bad one, printing FILE:LINE: tokenizer-limit: why; build
#    exits 0, its shards are those of a build without the bad document and
#    rejects.jsonl names it; lint reports rule tokenizer-limit at FILE:LINE
#    (exit 2, an error rule); hist counts it as refused and goes on;
#  - memory: the same runs under a 1 GiB address-space limit (ulimit -v).
# With "corpus": the real tokenizers on ../shared/corpus never hit a limit.
# Usage: tk_limits_cli.sh MKSHARDS SHARED_DIR TEST_DATA_DIR HOSTILE_TK_GEN [corpus]
set -uo pipefail

MKS=$1
SHARED=$2
DATA=$3
GEN=$4
MODE=${5:-}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mks_tklimits.XXXXXX")
trap 'rm -rf "$TMP"' EXIT

fails=0
pass() { echo "ok   - $1"; }
fail() { echo "FAIL - $1"; fails=$((fails + 1)); }
# The memory bound: 1 GiB of address space; an ASan build reserves terabytes
# of shadow memory up front, so there the bound is ASan's own hard RSS limit.
# Detected by ASan's entry symbol in the binary: CI ran this through ldd once and
# got no answer there, so every run aborted under ulimit -v.
if grep -qa __asan_init "$MKS"; then
    MEMLIMIT=":"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}hard_rss_limit_mb=3072"
else
    MEMLIMIT="ulimit -v 1048576"
fi
run() { # CMD... : sets $rc, $secs and $err (stderr); stdout to $TMP/out
    local t0 t1
    t0=$(date +%s.%N)
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    t1=$(date +%s.%N)
    secs=$(echo "$t1 - $t0" | bc)
    err=$(cat "$TMP/err")
}
expect() { # NAME WANT_RC SUBSTRING (searched in stderr and stdout; "" = any)
    if [ "$rc" -ne "$2" ]; then fail "$1: exit $rc, want $2; stderr: ${err:0:400}"
    elif [ -n "$3" ] && ! grep -qF -- "$3" "$TMP/err" "$TMP/out"; then fail "$1: output lacks '$3': ${err:0:400}"
    else pass "$1 (exit $rc)"; fi
}
fast() { # NAME MAX_SECONDS
    if [ "$(echo "$secs < $2" | bc)" = 1 ]; then pass "$1 in ${secs}s (< $2 s)"; else fail "$1 took ${secs}s (bound $2 s)"; fi
}

if [ "$MODE" = corpus ]; then
    # Every regex step of a real tokenizer stays far inside its budget (measured: at most ~8 units a byte
    # against TK_REGEX_WORK_PER_BYTE 256) and real normalizers far inside 16x: no tokenizer-limit on the corpus.
    C=()
    for f in code en-books multi web; do [ -f "$SHARED/corpus/$f.jsonl.zst" ] && C+=("$SHARED/corpus/$f.jsonl.zst"); done
    [ ${#C[@]} -eq 4 ] || { echo "skip: ../shared/corpus not present"; exit 77; }
    for t in "$SHARED/vocab/hf/qwen2/tokenizer.json" "$SHARED/vocab/hf/llama3/tokenizer.json" \
             "$DATA/tk_spm/hf_precompiled.json" "$DATA/tk_spm/bpe_nmt.model" "$DATA/tk_spm/bpe_denorm.model" \
             "$DATA/tk_hf/bl_nfc_deepseek.json"; do
        [ -f "$t" ] || { fail "missing $t"; continue; }
        run "$MKS" lint -t "$t" --json "${C[@]}"
        recs=$(grep -o '"records":[0-9]*' "$TMP/out" | head -1 | cut -d: -f2)
        docs=$(grep -o '"documents":[0-9]*' "$TMP/out" | head -1 | cut -d: -f2)
        if grep -q '"rule":"tokenizer-limit"' "$TMP/out" || [ -z "$docs" ] || [ "$docs" != "$recs" ] || [ "$docs" = 0 ]; then
            fail "corpus with $(basename "$(dirname "$t")")/$(basename "$t"): $(head -c 300 "$TMP/out") ${err:0:300}"
        else
            pass "corpus with $(basename "$(dirname "$t")")/$(basename "$t"): $docs documents, no tokenizer-limit"
        fi
    done
    echo "$fails failure(s)"
    [ "$fails" -eq 0 ]
    exit
fi

command -v bc >/dev/null || { echo "skip: bc not installed"; exit 77; }
"$GEN" "$TMP" || { echo "hostile_tk_gen failed"; exit 1; }
cd "$TMP" || exit 1

# ---- item 2: the hostile regex, 120 KB, each command -----------------------------
printf '{"text":"%s"}\n' "$(cat regex_120k.txt)" >big.jsonl
run timeout 60 "$MKS" encode -t regex.json -j 1 big.jsonl -o big.ids
expect "encode, regex on 120 KB" 2 "big.jsonl:1: tokenizer-limit: the document exceeds the tokenizer's regex work budget"
fast "encode refuses it" 3
run timeout 60 "$MKS" build -t regex.json -j 1 -L 64 --bos none --eos none --out bigset big.jsonl
expect "build, regex on 120 KB (every record rejected)" 2 "all 1 record(s) were rejected"
fast "build refuses it" 3
grep -q '"reason":"tokenizer-limit"' bigset/rejects.jsonl.part bigset/rejects.jsonl 2>/dev/null \
    && pass "build: rejects line" || fail "build: no tokenizer-limit reject line"
run timeout 60 "$MKS" lint -t regex.json -j 1 big.jsonl
expect "lint, regex on 120 KB" 2 "big.jsonl:1"
fast "lint refuses it" 3
grep -q "tokenizer-limit" "$TMP/out" && pass "lint names the rule" || fail "lint: no tokenizer-limit finding"
run timeout 60 "$MKS" hist -t regex.json -j 1 big.jsonl
expect "hist, regex on 120 KB (no document left)" 2 "no usable documents"
fast "hist refuses it" 3
grep -q "refused     1 document" "$TMP/out" && pass "hist counts it as refused" || fail "hist: no refused count"

# ---- item 3: one bad document among good ones, per limit -----------------------
good1='{"text":"hello world, the river by the stone"}'
good2='{"text":"good bye, quiet frost"}'
printf '%s\n%s\n' "$good1" "$good2" >good.jsonl
for kind in regex replace precompiled spm; do
    case $kind in
    regex) tok=regex.json; bad=$(cat regex_3k.txt); why="the document exceeds the tokenizer's regex work budget" ;;
    replace) tok=replace.json; bad=$(cat a_3k.txt); why="expand the document more than 16x" ;;
    precompiled) tok=precompiled.json; bad=$(cat a_3k.txt); why="expand the document more than 16x" ;;
    spm) tok=spm_norm.model; bad=$(cat a_3k.txt); why="expand the document more than 16x" ;;
    esac
    printf '%s\n{"text":"%s"}\n%s\n' "$good1" "$bad" "$good2" >mix.jsonl
    # encode: the good documents' lines, as without the bad one; 1 GiB of address space is plenty
    run bash -c "$MEMLIMIT; exec \"$MKS\" encode -t $tok -j 2 good.jsonl -o good.ids"
    expect "$kind: encode without the bad document" 0 ""
    run bash -c "$MEMLIMIT; exec timeout 60 \"$MKS\" encode -t $tok -j 2 mix.jsonl -o mix.ids"
    expect "$kind: encode with it, under ulimit -v 1 GiB" 0 "mix.jsonl:2: tokenizer-limit: "
    grep -qF -- "$why" "$TMP/err" && pass "$kind: encode says why" || fail "$kind: encode lacks '$why': $err"
    cmp -s good.ids mix.ids && pass "$kind: encode output = without the bad document" \
        || fail "$kind: encode output differs from the run without the bad document"
    # build: rejects.jsonl names it, the shards are those of the good documents
    framing=(--bos none --eos none)
    [ $kind = spm ] && framing=(--eos none)
    rm -rf set_good set_mix
    run "$MKS" build -t $tok -j 2 -L 16 "${framing[@]}" --out set_good good.jsonl
    expect "$kind: build without the bad document" 0 ""
    run bash -c "$MEMLIMIT; exec timeout 60 \"$MKS\" build -t $tok -j 2 -L 16 ${framing[*]} --out set_mix mix.jsonl"
    expect "$kind: build with it, under ulimit -v 1 GiB" 0 "1 record(s) listed in set_mix/rejects.jsonl"
    if grep -q '"file":"mix.jsonl","line":2,.*"reason":"tokenizer-limit"' set_mix/rejects.jsonl 2>/dev/null &&
       grep -qF -- "$why" set_mix/rejects.jsonl; then pass "$kind: rejects.jsonl: mix.jsonl:2 tokenizer-limit"
    else fail "$kind: rejects.jsonl: $(cat set_mix/rejects.jsonl 2>/dev/null)"; fi
    same=1
    for f in set_good/*.mks; do cmp -s "$f" "set_mix/$(basename "$f")" || same=0; done
    [ "$(ls set_good/*.mks | wc -l)" = "$(ls set_mix/*.mks | wc -l)" ] || same=0
    [ $same = 1 ] && pass "$kind: build shards = without the bad document" || fail "$kind: build shards differ"
    grep -q '"tokenizer-limit": 1' set_mix/manifest.json && pass "$kind: manifest counts the reject" \
        || fail "$kind: manifest reject_reasons lacks tokenizer-limit 1"
    run "$MKS" verify set_mix
    expect "$kind: verify the set" 0 ""
    # lint: the finding with its rule id and place
    run bash -c "$MEMLIMIT; exec timeout 60 \"$MKS\" lint -t $tok -j 2 mix.jsonl"
    expect "$kind: lint" 2 "mix.jsonl:2"
    grep -q "tokenizer-limit" "$TMP/out" && pass "$kind: lint rule tokenizer-limit" || fail "$kind: lint: $(cat "$TMP/out")"
    # hist: counted as refused, the good ones as usual
    run bash -c "$MEMLIMIT; exec timeout 60 \"$MKS\" hist -t $tok -j 2 --json mix.jsonl"
    expect "$kind: hist" 0 '"refused":1'
    grep -q '"docs":2,' "$TMP/out" && pass "$kind: hist counts the 2 good documents" || fail "$kind: hist: $(cat "$TMP/out")"
    run "$MKS" hist -t $tok -j 2 mix.jsonl
    expect "$kind: hist names it" 0 "first: mix.jsonl:2: "
done

# lint lists the rule
run "$MKS" lint --list-rules
expect "lint --list-rules" 0 "tokenizer-limit"

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
