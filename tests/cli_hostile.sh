#!/usr/bin/env bash
# Hostile command lines and output folders for mkshards (issue 12, items 10, 11,
# 12, 15, 16): an output naming an input is refused before anything is
# written (exit 2, input unchanged); build --out inside/around an input is
# refused, even with --force; two builds into one folder: the second fails at
# once on DIR/.lock; a tampered shard is never "up to date"; all-rejected ->
# exit 2; a write failure (EFBIG via ulimit -f) names the failing file; every
# bad numeric option value -> exit 64 with a message naming option and value;
# a garbage/truncated/FIFO build.ckpt and a planted rejects.jsonl.part link are
# harmless.
# Usage: cli_hostile.sh MKSHARDS SHARED_DIR TEST_DATA_DIR
set -uo pipefail

MKS=$1
SHARED=$2
export MKS_VOCAB_DIR=$SHARED/vocab
TMP=$(mktemp -d "${TMPDIR:-/tmp}/mks_hostile.XXXXXX")
bgpid=
cleanup() {
    [ -n "$bgpid" ] && kill -9 "$bgpid" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

fails=0
pass() { echo "ok   - $1"; }
fail() { echo "FAIL - $1"; fails=$((fails + 1)); }
run() { # CMD... : sets $rc and $err (stderr); stdout to $TMP/out
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    err=$(cat "$TMP/err")
}
expect() { # NAME WANT_RC SUBSTRING (searched in stderr and stdout; "" = any)
    if [ "$rc" -ne "$2" ]; then fail "$1: exit $rc, want $2; stderr: $err"
    elif [ -n "$3" ] && ! grep -qF -- "$3" "$TMP/err" "$TMP/out"; then fail "$1: output lacks '$3': $err"
    else pass "$1 (exit $rc)"; fi
}
sum() { md5sum "$1" | cut -d' ' -f1; }
unchanged() { # NAME FILE SUM_BEFORE
    if [ -f "$2" ] && [ "$(sum "$2")" = "$3" ]; then pass "$1: $2 unchanged"; else fail "$1: $2 was modified"; fi
}

if [ ! -x "$MKS" ]; then echo "mkshards binary not found: $MKS"; exit 1; fi
if [ ! -f "$MKS_VOCAB_DIR/gpt2.tiktoken" ]; then echo "SKIP: no gpt2.tiktoken"; exit 77; fi
cd "$TMP" || exit 1

for i in $(seq 1 60); do echo "{\"text\":\"document number $i: the quick brown fox jumps over the lazy dog\"}"; done >a.jsonl
mkdir -p d && cp a.jsonl d/b.jsonl
A=$(sum a.jsonl)
B=$(sum d/b.jsonl)

# ---------------------------------------------------------------- item 10
run "$MKS" encode -t gpt2 a.jsonl --ids-out a.jsonl
expect "encode --ids-out = input" 2 "--ids-out 'a.jsonl' is the same file as the input 'a.jsonl'"
unchanged "encode --ids-out = input" a.jsonl "$A"
ln a.jsonl hard.jsonl
run "$MKS" encode -t gpt2 a.jsonl --ids-out hard.jsonl
expect "encode --ids-out = hard link of input" 2 "is the same file as the input 'a.jsonl'"
unchanged "encode --ids-out = hard link" a.jsonl "$A"
run "$MKS" encode -t gpt2 d --ids-out d/b.jsonl
expect "encode --ids-out = file in input folder" 2 "lies inside the input folder 'd'"
unchanged "encode --ids-out in input folder" d/b.jsonl "$B"
run "$MKS" encode -t gpt2 d --ids-out d/new.ids
expect "encode --ids-out = new file in input folder" 2 "lies inside the input folder 'd'"
[ -e d/new.ids ] && fail "encode created d/new.ids" || pass "encode created nothing in the input folder"
cp "$MKS_VOCAB_DIR/gpt2.tiktoken" tok.tiktoken
T=$(sum tok.tiktoken)
run "$MKS" encode -t tok.tiktoken a.jsonl --ids-out tok.tiktoken
expect "encode --ids-out = tokenizer" 2 "is the same file as the tokenizer file 'tok.tiktoken'"
unchanged "encode --ids-out = tokenizer" tok.tiktoken "$T"

run "$MKS" encode -t gpt2 a.jsonl --ids-out a.ids
expect "encode ok" 0 ""
I=$(sum a.ids)
run "$MKS" decode -t gpt2 --ids a.ids --out a.ids
expect "decode --out = --ids" 2 "--out 'a.ids' is the same file as --ids 'a.ids'"
unchanged "decode --out = --ids" a.ids "$I"
run "$MKS" decode -t gpt2 a.ids -o a.ids
expect "decode positional ids = --out" 2 "is the same file as --ids"
unchanged "decode positional" a.ids "$I"

run "$MKS" tokenizer train -n 300 -q -o a.jsonl a.jsonl
expect "tokenizer train --out = corpus" 2 "--out 'a.jsonl' is the same file as the input 'a.jsonl'"
unchanged "tokenizer train --out = corpus" a.jsonl "$A"
cp a.jsonl c.meta.json
C=$(sum c.meta.json)
run "$MKS" tokenizer train -n 300 -q -o c a.jsonl c.meta.json
expect "tokenizer train sidecar = corpus" 2 "--out (its .meta.json sidecar) 'c.meta.json' is the same file as the input"
unchanged "tokenizer train sidecar" c.meta.json "$C"
run "$MKS" tokenizer train -n 300 -q -o d/tok.tiktoken d
expect "tokenizer train --out in input folder" 2 "lies inside the input folder 'd'"
run "$MKS" tokenizer train -n 300 -q -s '<|endoftext|>' -o t.tiktoken a.jsonl
expect "tokenizer train ok" 0 ""
T1=$(sum t.tiktoken)
T2=$(sum t.tiktoken.meta.json)
run "$MKS" tokenizer export -t t.tiktoken -o t.tiktoken
expect "tokenizer export --out = source" 2 "--out 't.tiktoken' is the same file as the tokenizer file 't.tiktoken'"
unchanged "tokenizer export --out = source" t.tiktoken "$T1"
run "$MKS" tokenizer export -t t.tiktoken -o t.tiktoken.meta.json
expect "tokenizer export --out = source sidecar" 2 "is the same file as the tokenizer file 't.tiktoken.meta.json'"
unchanged "tokenizer export --out = sidecar" t.tiktoken.meta.json "$T2"
run "$MKS" tokenizer export -t t.tiktoken -o t2.json
expect "tokenizer export to another file" 0 ""

run "$MKS" hist -t gpt2 --svg a.jsonl a.jsonl
expect "hist --svg = input" 2 "--svg 'a.jsonl' is the same file as the input 'a.jsonl'"
unchanged "hist --svg = input" a.jsonl "$A"
run "$MKS" lint -t gpt2 --hist --svg d/h.svg d
expect "lint --hist --svg in input folder" 2 "--svg 'd/h.svg' lies inside the input folder 'd'"

# ---------------------------------------------------------------- item 11
run "$MKS" build -t gpt2 -L 16 -q -o good d
expect "build good" 0 ""
M0=$(sum good/manifest.json)
run "$MKS" build -t gpt2 -L 16 -q -o d d
expect "build --out = input folder" 2 "--out 'd' is the same file as the input 'd'"
run "$MKS" build -t gpt2 -L 16 -q -o d/sub d
expect "build --out inside input folder" 2 "--out 'd/sub' lies inside the input folder 'd'"
[ -e d/sub ] && fail "build created d/sub" || pass "build created nothing inside the input"
cp a.jsonl good/x.jsonl
run "$MKS" build -t gpt2 -L 16 -q -o good good/x.jsonl
expect "build input inside --out" 2 "the input 'good/x.jsonl' lies inside --out 'good'"
run "$MKS" build -t gpt2 -L 16 -q --force -o good good/x.jsonl
expect "build input inside --out, --force" 2 "the input 'good/x.jsonl' lies inside --out 'good'"
run "$MKS" build -t gpt2 -L 16 -q --force -o good good
expect "build --out = input folder, --force" 2 "is the same file as the input 'good'"
unchanged "previous manifest kept" good/manifest.json "$M0"
rm good/x.jsonl
run "$MKS" verify good
expect "previous build still verifies" 0 "all checksums match"
[ -e good/.lock ] && fail "good/.lock left behind" || pass "no lock file left after a build"

# ------------------------------------------- issue 32 item 11: special entries
# A dataset-named entry of an input folder that is not a regular file (a
# dangling link, a FIFO, a socket) is refused by every command that reads the
# folder, through the reader's one folder walk: exit 2 naming the path and
# what it is (build used to skip it and exit 0, the file gone from the set).
special() { # KIND MAKE-COMMAND WORDS
    rm -rf sp && mkdir sp && cp a.jsonl sp/a.jsonl && (cd sp && eval "$2")
    for c in "build -t gpt2 -L 16 -q -o sp_out sp" "build -t gpt2 -L 16 -q --part 1/2 -o sp_out sp" \
             "lint sp" "encode -t gpt2 --ids-out sp.ids sp" "hist -t gpt2 sp" \
             "tokenizer train -n 300 -q -o sp.tiktoken sp"; do
        rc=0
        timeout 10 "$MKS" $c >"$TMP/out" 2>"$TMP/err" || rc=$?
        err=$(cat "$TMP/err")
        expect "$1 in the folder: ${c%% *} (${c#* })" 2 "sp/b.jsonl: $3"
    done
    [ -e sp_out/manifest.json ] && fail "$1: build wrote a manifest" || pass "$1: build wrote nothing"
    rm -rf sp_out sp.ids sp.tiktoken*
}
special "dangling link" "ln -s missing.jsonl b.jsonl" "symbolic link to nothing readable"
special "FIFO" "mkfifo b.jsonl" "a pipe or FIFO, not a regular file"
if python3 -c 'import socket' 2>/dev/null; then
    special "socket" "python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('b.jsonl')\"" "a socket, not a regular file"
fi
# entries that are not dataset files by name are no input, whatever they are
rm -rf sp && mkdir sp && cp a.jsonl sp/a.jsonl && ln -s missing sp/notes && mkfifo sp/pipe.bin
run timeout 10 "$MKS" build -t gpt2 -L 16 -q -o sp_out sp
expect "a dangling link and a FIFO without a dataset name are not inputs" 0 ""
rm -rf sp sp_out

# ---------------------------------------------------------------- item 12
mkfifo feed
"$MKS" build -t gpt2 -L 16 -q -o locked - <feed 2>"$TMP/first.err" &
bgpid=$!
exec 7>feed
cat a.jsonl >&7
for _ in $(seq 100); do [ -s locked/.lock ] && break; sleep 0.05; done
start=$(date +%s%N)
run timeout 20 "$MKS" build -t gpt2 -L 16 -q -o locked a.jsonl
ms=$(( ($(date +%s%N) - start) / 1000000 ))
expect "second build into a locked folder" 2 "another build or merge holds locked/.lock (pid $bgpid)"
[ "$ms" -lt 5000 ] && pass "second build failed fast (${ms} ms)" || fail "second build took ${ms} ms"
exec 7>&-
wait "$bgpid"
brc=$?
bgpid=
[ "$brc" -eq 0 ] && pass "first build completed" || fail "first build: exit $brc: $(cat "$TMP/first.err")"
run "$MKS" verify locked
expect "first build verifies" 0 "all checksums match"

# tampered payload, same size: never "up to date"
run "$MKS" build -t gpt2 -L 16 -o tam a.jsonl
expect "build for tampering" 0 ""
python3 - tam/train-00000.mks <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
b[300] ^= 0x01  # inside the token payload, size unchanged
open(p, 'wb').write(b)
EOF
run "$MKS" build -t gpt2 -L 16 -o tam a.jsonl
if [ "$rc" -eq 0 ] && ! grep -q "up to date" "$TMP/err" && grep -q "fails verification" "$TMP/err"; then
    pass "tampered shard is rebuilt, not 'up to date'"
else fail "tampered shard: exit $rc: $err"; fi
run "$MKS" verify tam
expect "rebuilt set verifies" 0 "all checksums match"
run "$MKS" build -t gpt2 -L 16 -o tam a.jsonl
expect "untouched set is up to date" 0 "shard(s) verified: structure, file checksum, size and rows match the manifest"

# ---------------------------------------------------------------- item 15
printf 'not json\n{"other":1}\n{"text":"\\u0000"}\n' >bad.jsonl
run "$MKS" build -t gpt2 -L 16 -q -o rej bad.jsonl
expect "all records rejected" 2 "no row written: all 3 record(s) were rejected (3)"
[ -e rej/manifest.json ] && fail "manifest written for an empty build" || pass "no manifest for an empty build"
[ -s rej/rejects.jsonl ] && pass "rejects.jsonl lists the rejects" || fail "no rejects.jsonl"
run "$MKS" build -t gpt2 -L 16 -q -o rej bad.jsonl
expect "all records rejected, rerun" 2 "no row written"

for _ in $(seq 40); do cat a.jsonl; done >big.jsonl
run bash -c "trap '' XFSZ; ulimit -f 8; exec \"$MKS\" build -t gpt2 -L 64 --shard-tokens 1M -q -o efbig big.jsonl"
expect "EFBIG names the shard" 2 "cannot write 'efbig/train-00000.mks.tmp': File too large"
grep -q "rejects.jsonl.part" "$TMP/err" && fail "EFBIG blamed on rejects.jsonl.part" || pass "rejects file not blamed"

# ---------------------------------------------------------------- item 16
bad_values=(nan inf -inf -1 1e999 99999999999999999999 12abc "" " 5" 0x10 +3)
check_opt() { # LABEL VALUE CMD...   (the value is the last argument of CMD)
    local label=$1 v=$2
    shift 2
    run "$@"
    if [ "$rc" -eq 64 ] && grep -qF -- "$label" "$TMP/err" && grep -qF -- "got '$v'" "$TMP/err"; then
        pass "$label '$v' -> 64"
    else fail "$label '$v': exit $rc: $err"; fi
}
for v in "${bad_values[@]}" 0; do
    check_opt --seq-len "$v" "$MKS" build -t gpt2 -o x a.jsonl --seq-len "$v"
    check_opt --shard-tokens "$v" "$MKS" build -t gpt2 -L 16 -o x a.jsonl --shard-tokens "$v"
    check_opt --batch-bytes "$v" "$MKS" build -t gpt2 -L 16 -o x a.jsonl --batch-bytes "$v"
    check_opt --frame-rows "$v" "$MKS" build -t gpt2 -L 16 -o x a.jsonl --frame-rows "$v"
    check_opt --bfd-window "$v" "$MKS" build -t gpt2 -L 16 -o x a.jsonl --bfd-window "$v"
    check_opt --batch-bytes "$v" "$MKS" encode -t gpt2 a.jsonl --ids-out - --batch-bytes "$v"
    check_opt --batch-docs "$v" "$MKS" encode -t gpt2 a.jsonl --ids-out - --batch-docs "$v"
    check_opt --vocab-size "$v" "$MKS" tokenizer train -o y.tiktoken a.jsonl --vocab-size "$v"
    check_opt --max-doc-bytes "$v" "$MKS" lint a.jsonl --max-doc-bytes "$v"
    check_opt --max-record-bytes "$v" "$MKS" hist -t gpt2 a.jsonl --max-record-bytes "$v"
    check_opt --outlier-factor "$v" "$MKS" lint a.jsonl --outlier-factor "$v"
    check_opt --min-bytes-per-token "$v" "$MKS" lint a.jsonl --min-bytes-per-token "$v"
done
for v in "${bad_values[@]}"; do
    check_opt --threads "$v" "$MKS" build -t gpt2 -L 16 -o x a.jsonl --threads "$v"
    check_opt --threads "$v" "$MKS" encode -t gpt2 a.jsonl --ids-out - -j "$v"
    check_opt --threads "$v" "$MKS" lint a.jsonl -j "$v"
    check_opt --threads "$v" "$MKS" tokenizer train -n 300 -o y.tiktoken a.jsonl -j "$v"
    check_opt --zstd "$v" "$MKS" build -t gpt2 -L 16 -o x a.jsonl --zstd "$v"
    check_opt --seed "$v" "$MKS" build -t gpt2 -L 16 -o x a.jsonl --seed "$v"
    check_opt --val-fraction "$v" "$MKS" build -t gpt2 -L 16 -o x a.jsonl --val-fraction "$v"
    check_opt --min-frequency "$v" "$MKS" tokenizer train -n 300 -o y.tiktoken a.jsonl --min-frequency "$v"
    check_opt --max-token-bytes "$v" "$MKS" tokenizer train -n 300 -o y.tiktoken a.jsonl --max-token-bytes "$v"
    check_opt --max-piece-bytes "$v" "$MKS" tokenizer train -n 300 -o y.tiktoken a.jsonl --max-piece-bytes "$v"
    check_opt --sample-bytes "$v" "$MKS" tokenizer train -n 300 -o y.tiktoken a.jsonl --sample-bytes "$v"
    check_opt --max-examples "$v" "$MKS" lint a.jsonl --max-examples "$v"
    check_opt --long-run "$v" "$MKS" lint a.jsonl --long-run "$v"
done
for v in 1 1.5 0.999999999999999999999 1e-999; do
    check_opt --val-fraction "$v" "$MKS" build -t gpt2 -L 16 -o x a.jsonl --val-fraction "$v"
done
for v in 0/1 2/1 1/0 -1/2 1/-2 1/ /2 1/2x a/b 1/99999999999999999999 99999999999999999999/1 1/1000001 " 1/2"; do
    check_opt --part "$v" "$MKS" build -t gpt2 -L 16 -o x a.jsonl --part "$v"
done
run "$MKS" build -t gpt2 -L 1024 --bfd-window 16777216 -o x a.jsonl
expect "--bfd-window x --seq-len too large" 64 "--bfd-window x --seq-len must stay below 2^31"
for o in --seq-len --threads --shard-tokens --zstd --part --val-fraction --batch-bytes --seed; do
    run "$MKS" build -t gpt2 -o x a.jsonl "$o"
    expect "build $o without a value" 64 "option '$o' needs a value"
done
for o in --vocab-size --min-frequency --sample-bytes; do
    run "$MKS" tokenizer train -o y.tiktoken a.jsonl "$o"
    expect "tokenizer train $o without a value" 64 "option '$o' needs a value"
done
run "$MKS" encode -t gpt2 a.jsonl --batch-docs
expect "encode --batch-docs without a value" 64 "option '--batch-docs' needs a value"
[ -e x ] && fail "a refused build created its --out" || pass "no --out created by refused builds"

# ---------------------------------------------------------------- resume state
# a real checkpoint: kill -9 a slow build (a checkpoint at every batch) as soon as one exists
export MKS_CHECKPOINT_SECONDS=0
OPTS=(-t gpt2 -L 64 --shard-tokens 2K --batch-bytes 4K -j 1)
run "$MKS" build "${OPTS[@]}" -q -o ref big.jsonl
expect "reference build" 0 ""
"$MKS" build "${OPTS[@]}" -q -o ck big.jsonl 2>/dev/null &
bgpid=$!
for _ in $(seq 400); do [ -s ck/build.ckpt ] && break; sleep 0.01; done
kill -STOP "$bgpid" 2>/dev/null
cp ck/build.ckpt good.ckpt 2>/dev/null
kill -9 "$bgpid" 2>/dev/null
wait "$bgpid" 2>/dev/null
bgpid=
if [ ! -s good.ckpt ]; then
    fail "no checkpoint caught (build finished too fast?)"
else
    pass "caught a checkpoint ($(stat -c %s good.ckpt) bytes)"
    cp -r ck ck0 # the killed state: shards + rejects.jsonl.part + checkpoint
    n=$(stat -c %s good.ckpt)
    variant() { # NAME: restore the killed state, apply $2 (a command) to ck/build.ckpt, rerun
        rm -rf ck && cp -r ck0 ck && cp good.ckpt ck/build.ckpt
        eval "$2"
        run timeout 20 "$MKS" build "${OPTS[@]}" -o ck big.jsonl
        if [ "$rc" -eq 0 ] && diff -r ref ck >/dev/null; then pass "resume state '$1': output identical to the reference ($(grep -c 'resuming after' "$TMP/err") resumed)"
        else fail "resume state '$1': exit $rc, diff: $(diff -rq ref ck | head -3); $err"; fi
    }
    variant valid ":"
    grep -q "resuming after" "$TMP/err" && pass "valid checkpoint resumed" || fail "valid checkpoint was not used"
    variant truncated "truncate -s $((n / 2)) ck/build.ckpt"
    variant "cut 9 bytes" "truncate -s $((n - 9)) ck/build.ckpt"
    variant empty ": > ck/build.ckpt"
    variant garbage "head -c $n /dev/urandom > ck/build.ckpt"
    variant "byte flip" "printf '\\xff' | dd of=ck/build.ckpt bs=1 seek=40 conv=notrunc status=none"
    variant "appended" "echo junk >> ck/build.ckpt"
    variant fifo "rm ck/build.ckpt && mkfifo ck/build.ckpt"
    variant "shard deleted" "rm -f ck/train-00000.mks"
    variant "manifest fifo" "mkfifo ck/manifest.json"
    variant "shard fifo" "rm -f ck/train-00003.mks && mkfifo ck/train-00003.mks"
    variant "shard flipped" "printf '\\x01' | dd of=ck/train-00000.mks bs=1 seek=200 conv=notrunc status=none"
    echo precious >victim
    V=$(sum victim)
    variant "rejects link" "rm -f ck/rejects.jsonl.part && ln -s ../victim ck/rejects.jsonl.part"
    unchanged "planted rejects.jsonl.part link" victim "$V"
fi

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
