#!/usr/bin/env bash
# cli_gzip.sh MKSHARDS SHARED_DIR TEST_DATA_DIR - gzip inputs through every
# command that reads .zst (issue 29 item 1): encode, lint, hist, build,
# build --part + merge, tokenizer train. Fixtures are made here from the
# plain files: gzip (single member), gzip of pieces concatenated (multi-
# member), pigz, bgzip (BGZF blocks + EOF block), and damaged copies
# (truncated, bad CRC, trailing garbage). Each must give the same bytes as
# the plain input; damage is a zstd-corrupt finding / reject with file and
# offset, exit 2, never a crash. pigz and bgzip come from `make deps`
# (pigz, tabix): missing, they fail under CI=true and are skipped otherwise.
set -uo pipefail
MKS=$1
SHARED=$2
DATA=$3/cli
VOCAB=$SHARED/vocab
[ -f "$VOCAB/gpt2.tiktoken" ] || { echo "SKIP: no $VOCAB/gpt2.tiktoken"; exit 77; }
export MKS_VOCAB_DIR=$VOCAB
T=$(mktemp -d "${TMPDIR:-/tmp}/mks_gz.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }
tool() { # NAME: present, or fail (CI) / skip note (local)
    command -v "$1" > /dev/null && return 0
    if [ "${CI:-}" = true ]; then bad "$1 not installed (make deps installs it)"; else echo "skip - no $1 here"; fi
    return 1
}

# input: the test documents repeated so the files outgrow one 256 KiB raw
# read (the reader's inflate thread), plus the shared corpus' first lines
: > "$T/in.jsonl"
for i in $(seq 1 400); do cat "$DATA/small.jsonl" >> "$T/in.jsonl"; done
if command -v zstd > /dev/null && [ -f "$SHARED/corpus/web.jsonl.zst" ]; then
    zstd -dc "$SHARED/corpus/web.jsonl.zst" 2> /dev/null | head -n 300 >> "$T/in.jsonl"
fi
mkdir -p "$T/gz"
gzip -6 -c "$T/in.jsonl" > "$T/gz/single.jsonl.gz"
split -n l/3 -d "$T/in.jsonl" "$T/piece"
cat <(gzip -c "$T/piece00") <(gzip -1 -c "$T/piece01") <(gzip -9 -c "$T/piece02") > "$T/gz/multi.jsonl.gz"
tool pigz && pigz -c "$T/in.jsonl" > "$T/gz/pigz.jsonl.gz"
tool bgzip && bgzip -c "$T/in.jsonl" > "$T/gz/bgzip.jsonl.gz"
cp "$T/gz/multi.jsonl.gz" "$T/gz/sniffed.jsonl" # no .gz: found by its magic

# encode: same ids as the plain file
"$MKS" encode -t gpt2 "$T/in.jsonl" --ids-out "$T/plain.ids" 2> /dev/null || bad "encode plain"
for f in "$T"/gz/*; do
    n=$(basename "$f")
    if "$MKS" encode -t gpt2 "$f" --ids-out "$T/$n.ids" 2> "$T/err" && cmp -s "$T/$n.ids" "$T/plain.ids"; then
        ok "encode $n = plain ids"
    else
        bad "encode $n: $(head -2 "$T/err")"
    fi
done

# lint / hist: same counts
"$MKS" lint --json "$T/in.jsonl" > "$T/lint_plain.json" 2> /dev/null
"$MKS" lint --json "$T/gz/multi.jsonl.gz" > "$T/lint_gz.json" 2> /dev/null
python3 - "$T/lint_plain.json" "$T/lint_gz.json" << 'EOF' && ok "lint .gz = lint .jsonl (counts)" || bad "lint .gz differs"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
keys = ("records", "documents", "bytes", "median_bytes", "max_doc_bytes", "errors", "warnings", "infos", "exit")
sys.exit(0 if all(a[k] == b[k] for k in keys) else 1)
EOF
"$MKS" hist -t gpt2 "$T/in.jsonl" > "$T/hist_plain" 2> /dev/null
if "$MKS" hist -t gpt2 "$T/gz/multi.jsonl.gz" > "$T/hist_gz" 2> /dev/null && cmp -s "$T/hist_plain" "$T/hist_gz"; then
    ok "hist .gz = hist .jsonl"
else
    bad "hist .gz differs: $(diff "$T/hist_plain" "$T/hist_gz" | head -4)"
fi

# build: the same shards; --part 1/2 + 2/2 + merge of a folder of .gz = one build
B=(-t gpt2 -L 64 -j 2 --val-fraction 0.1)
"$MKS" build "${B[@]}" -o "$T/b_plain" "$T/in.jsonl" > /dev/null 2>&1 || bad "build plain"
"$MKS" build "${B[@]}" -o "$T/b_gz" "$T/gz/multi.jsonl.gz" > /dev/null 2>&1 || bad "build .gz"
same_shards() { # A B NAME
    local d=0 n=0
    for s in "$1"/*.mks; do
        n=$((n + 1))
        cmp -s "$s" "$2/$(basename "$s")" || d=1
    done
    [ "$n" -gt 0 ] && [ $d = 0 ] && [ "$(ls "$1"/*.mks | wc -l)" = "$(ls "$2"/*.mks | wc -l)" ] && ok "$3" || bad "$3"
}
same_shards "$T/b_plain" "$T/b_gz" "build .jsonl.gz: shards identical to .jsonl"
"$MKS" build "${B[@]}" -o "$T/b_dir" "$T/gz" > /dev/null 2>&1 || bad "build folder of .gz"
"$MKS" build "${B[@]}" --part 1/2 -o "$T/p1" "$T/gz" > /dev/null 2>&1 || bad "build --part 1/2"
"$MKS" build "${B[@]}" --part 2/2 -o "$T/p2" "$T/gz" > /dev/null 2>&1 || bad "build --part 2/2"
"$MKS" merge --out "$T/merged" "$T/p1" "$T/p2" > /dev/null 2>&1 || bad "merge"
same_shards "$T/b_dir" "$T/merged" "folder of .gz: --part 1/2 + 2/2 + merge = one build"

# tokenizer train: the same vocabulary
"$MKS" tokenizer train --vocab-size 300 --out "$T/v_plain.tiktoken" "$T/in.jsonl" > /dev/null 2>&1
if "$MKS" tokenizer train --vocab-size 300 --out "$T/v_gz.tiktoken" "$T/gz/pigz.jsonl.gz" "$T/gz/multi.jsonl.gz" \
    > /dev/null 2>&1 && "$MKS" tokenizer train --vocab-size 300 --out "$T/v_2.tiktoken" "$T/in.jsonl" "$T/in.jsonl" \
    > /dev/null 2>&1 && cmp -s "$T/v_gz.tiktoken" "$T/v_2.tiktoken"; then
    ok "tokenizer train from .gz = from .jsonl"
else
    bad "tokenizer train from .gz differs"
fi

# damage: a finding / reject line with file and offset, exit 2, no crash
sz=$(stat -c %s "$T/gz/single.jsonl.gz")
head -c $((sz - 30)) "$T/gz/single.jsonl.gz" > "$T/trunc.jsonl.gz"
python3 -c "
import sys; d = bytearray(open(sys.argv[1], 'rb').read()); d[-8] ^= 1; open(sys.argv[2], 'wb').write(d)
open(sys.argv[3], 'wb').write(bytes(d[:-8]) + bytes([d[-8] ^ 1]) + bytes(d[-7:]) + b'trailing garbage')
" "$T/gz/single.jsonl.gz" "$T/crc.jsonl.gz" "$T/tail.jsonl.gz"
for c in "trunc:gzip stream truncated" "crc:incorrect data check" "tail:trailing garbage"; do
    n=${c%%:*}
    want=${c#*:}
    "$MKS" lint "$T/$n.jsonl.gz" > "$T/out" 2>&1
    rc=$?
    if [ $rc = 2 ] && grep -q "zstd-corrupt" "$T/out" && grep -qE "$n\.jsonl\.gz:[0-9]+ @[0-9]+ .*$want" "$T/out"; then
        ok "lint $n.jsonl.gz: exit 2, zstd-corrupt at file:line @offset: $want"
    else
        bad "lint $n.jsonl.gz: exit $rc: $(grep -m2 "@" "$T/out")"
    fi
    "$MKS" build "${B[@]}" -o "$T/d_$n" "$T/$n.jsonl.gz" > /dev/null 2> "$T/err"
    rc=$?
    if [ $rc -le 2 ] && grep -q "\"zstd-corrupt\"" "$T/d_$n/rejects.jsonl" 2> /dev/null &&
        grep -q "$n.jsonl.gz" "$T/d_$n/rejects.jsonl"; then
        ok "build $n.jsonl.gz: exit $rc, reject line names the file"
    else
        bad "build $n.jsonl.gz: exit $rc, rejects: $(head -c 300 "$T/d_$n/rejects.jsonl" 2> /dev/null) $(head -2 "$T/err")"
    fi
done

[ $fails = 0 ] && echo "cli_gzip: all ok" || echo "cli_gzip: $fails failure(s)"
[ $fails = 0 ]
