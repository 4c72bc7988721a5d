#!/usr/bin/env bash
# cli_arrow.sh MKSHARDS SHARED_DIR TEST_DATA_DIR BUILD_DIR [PYTHON] - Parquet
# and Arrow IPC inputs through every command that reads .jsonl (issue 29):
# encode, lint, hist, build (+ --part K/N + merge, --resume after kill -9),
# tokenizer train. Fixtures are written at test time by pyarrow
# (tests/make_arrow_fixtures.py): every Parquet codec, string / large_string
# / string_view / dictionary columns, a struct field (--field meta.body),
# nulls, a folder, IPC file and stream format; each must give the same bytes
# as the same documents in JSONL. Damaged files are a zstd-corrupt finding /
# reject line naming the file, exit 2, never a crash.
# A build without Arrow (MKS_ENABLE_ARROW=OFF or not found) must refuse
# .parquet / .arrow with exit 2 and a message naming the option: that is
# all this checks there. PYTHON: the python CMake took pyarrow from; else
# one is looked for, or pyarrow is pip-installed into BUILD_DIR/arrow-venv
# (missing, under CI=true that fails; elsewhere it is a skip).
set -uo pipefail
MKS=$1
SHARED=$2
DATA=$3/cli
BUILD=$4
PY=${5:-}
SRC=$(cd "$(dirname "$0")/.." && pwd)
VOCAB=$SHARED/vocab
[ -f "$VOCAB/gpt2.tiktoken" ] || { echo "SKIP: no $VOCAB/gpt2.tiktoken"; exit 77; }
export MKS_VOCAB_DIR=$VOCAB
T=$(mktemp -d "${TMPDIR:-/tmp}/mks_arrow.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }
finish() {
    [ $fails = 0 ] && echo "cli_arrow: all ok" || echo "cli_arrow: $fails failure(s)"
    [ $fails = 0 ]
    exit
}

# a build without Arrow: refused, exit 2, the option named
printf 'PAR1 not really\n' > "$T/x.parquet"
cp "$T/x.parquet" "$T/x.arrow"
"$MKS" lint "$T/x.parquet" > "$T/out" 2>&1
rc=$?
if grep -q "MKS_ENABLE_ARROW" "$T/out"; then
    for f in x.parquet x.arrow; do
        for cmd in "lint" "encode -t gpt2 --ids-out $T/ids" "build -t gpt2 -L 64 -o $T/no_arrow" "tokenizer train --vocab-size 300 --out $T/v"; do
            # shellcheck disable=SC2086
            "$MKS" $cmd "$T/$f" > "$T/out" 2>&1
            rc=$?
            if [ $rc = 2 ] && grep -q "MKS_ENABLE_ARROW" "$T/out"; then
                ok "no Arrow in this build: ${cmd%% *} $f refused, exit 2, names MKS_ENABLE_ARROW"
            else
                bad "no Arrow: ${cmd%% *} $f: exit $rc: $(head -2 "$T/out")"
            fi
        done
    done
    finish
fi
if [ $rc = 2 ] && grep -q "zstd-corrupt" "$T/out" && grep -q "x.parquet:1 @0 .*parquet: not a readable Parquet file" "$T/out" &&
    grep -qE "^zstd-corrupt .*Parquet / Arrow IPC" "$T/out"; then
    ok "a file that is not Parquet: exit 2, zstd-corrupt finding at x.parquet:1, its meaning names Parquet"
else
    bad "not-Parquet file: exit $rc: $(head -12 "$T/out")"
fi

# a python with pyarrow to write the fixtures
has_pyarrow() { [ -n "$1" ] && "$1" -c 'import pyarrow, pyarrow.parquet' > /dev/null 2>&1; }
if ! has_pyarrow "$PY"; then
    PY=""
    for c in "$HOME/.local/share/mkshards/arrow-venv/bin/python" "$BUILD/arrow-venv/bin/python" python3; do
        has_pyarrow "$c" && { PY=$c; break; }
    done
fi
if [ -z "$PY" ]; then
    V=$BUILD/arrow-venv
    if python3 -m venv "$V" > /dev/null 2>&1 &&
        "$V/bin/python" -m pip install -q --disable-pip-version-check pyarrow > /dev/null 2>&1; then
        PY=$V/bin/python
    elif [ "${CI:-}" = true ]; then
        bad "no python with pyarrow, and pip could not install it into $V (make deps makes one)"
        finish
    else
        echo "SKIP: no python with pyarrow (make deps makes one; or pip install pyarrow)"
        exit 77
    fi
fi
echo "fixtures: $PY ($("$PY" -c 'import pyarrow; print("pyarrow", pyarrow.__version__)'))"

# input: the test documents, plus the shared corpus' first lines
: > "$T/src.jsonl"
for i in 1 2 3; do cat "$DATA/small.jsonl" >> "$T/src.jsonl"; done
if command -v zstd > /dev/null && [ -f "$SHARED/corpus/web.jsonl.zst" ]; then
    zstd -dc "$SHARED/corpus/web.jsonl.zst" 2> /dev/null | head -n 300 >> "$T/src.jsonl"
fi
"$PY" "$SRC/tests/make_arrow_fixtures.py" "$T/src.jsonl" "$T/fx" || { bad "make_arrow_fixtures.py"; finish; }
IN=$T/fx/docs.jsonl # the documents as the fixtures hold them
FX=$T/fx

# encode: the same ids as the JSONL
"$MKS" encode -t gpt2 "$IN" --ids-out "$T/plain.ids" 2> /dev/null || bad "encode plain"
enc() { # NAME FILE [ARGS...]
    local n=$1 f=$2
    shift 2
    if "$MKS" encode -t gpt2 "$@" "$f" --ids-out "$T/x.ids" 2> "$T/err" && cmp -s "$T/x.ids" "$T/plain.ids"; then
        ok "encode $n = JSONL ids"
    else
        bad "encode $n: $(head -c 300 "$T/err")"
    fi
}
for f in "$FX"/codec/*.parquet "$FX"/types/*.parquet "$FX"/ipc/*.arrow "$FX/wide.parquet"; do
    enc "${f#"$FX"/}" "$f"
done
enc "struct.parquet --field meta.body" "$FX/struct.parquet" --field meta.body
enc "folder of 3 .parquet" "$FX/folder"

# lint / hist: same counts and histogram; the memory line on stderr
"$MKS" lint --json "$IN" > "$T/lint_plain.json" 2> /dev/null
"$MKS" lint --json "$FX/codec/snappy.parquet" > "$T/lint_pq.json" 2> "$T/lint_err"
python3 - "$T/lint_plain.json" "$T/lint_pq.json" << 'EOF' && ok "lint .parquet = lint .jsonl (counts)" || bad "lint .parquet differs"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
keys = ("records", "documents", "bytes", "median_bytes", "max_doc_bytes", "errors", "warnings", "infos", "exit")
sys.exit(0 if all(a[k] == b[k] for k in keys) else 1)
EOF
if grep -qE "mkshards lint: 1 Parquet/Arrow file\(s\), [0-9]+ row group\(s\)/batch\(es\); Arrow held at most [0-9.]+ MiB" \
    "$T/lint_err"; then
    ok "lint reports the largest row group's memory"
else
    bad "lint: no memory line: $(cat "$T/lint_err")"
fi
# a string field is read as views into the decoded page: for one 4.9 MB
# plain page Arrow holds the page (and the read buffer), not the page plus a
# copy of every value (10.3 MiB before, 5.7 MiB now)
"$MKS" lint "$FX/onepage.parquet" > /dev/null 2> "$T/lint_err"
held=$(grep -oE "Arrow held at most [0-9.]+ MiB" "$T/lint_err" | grep -oE "[0-9.]+")
if [ -n "$held" ] && python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) * 1048576 < 1.5 * int(sys.argv[2]) else 1)" \
    "$held" "$(cat "$FX/onepage.bytes")"; then
    ok "one 4.9 MB page: Arrow held $held MiB (< 1.5x the text)"
else
    bad "one 4.9 MB page: Arrow held ${held:-?} MiB for $(cat "$FX/onepage.bytes") bytes of text: $(cat "$T/lint_err")"
fi
# the pipeline's first batches on columnar input are small (pipeline.c, batch_cap)
if "$BUILD/test_arrow_pipeline" "$FX/onepage.parquet" > "$T/out" 2>&1; then
    ok "columnar input: first batch $(grep -m1 -oE "batch 0: [0-9]+ records, [0-9]+ bytes" "$T/out")"
else
    bad "test_arrow_pipeline onepage.parquet: $(tail -4 "$T/out")"
fi
"$MKS" hist -t gpt2 "$IN" > "$T/hist_plain" 2> /dev/null
if "$MKS" hist -t gpt2 "$FX/ipc/stream.arrow" > "$T/hist_pq" 2> /dev/null && cmp -s "$T/hist_plain" "$T/hist_pq"; then
    ok "hist .arrow (stream) = hist .jsonl"
else
    bad "hist .arrow differs: $(diff "$T/hist_plain" "$T/hist_pq" | head -4)"
fi

# nulls: reported like missing fields, with row group and row
n_null=$(cat "$FX/nulls.count")
for f in nulls.parquet nulls.arrow; do
    "$MKS" lint --json "$FX/$f" > "$T/ln.json" 2> /dev/null
    if python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
rules = {x['rule']: x['count'] for x in r['findings']}
sys.exit(0 if rules.get('field-missing') == int(sys.argv[2]) and r['documents'] == int(sys.argv[3]) else 1)
" "$T/ln.json" "$n_null" "$(cat "$FX/docs.count")" 2> "$T/err"; then
        ok "lint $f: $n_null nulls = field-missing findings, the documents kept"
    else
        bad "lint $f: $(head -c 400 "$T/ln.json") $(head -3 "$T/err")"
    fi
done
"$MKS" lint "$FX/nulls.parquet" > "$T/out" 2> /dev/null
grep -q "nulls.parquet:4 @0  field 'text' is null (row group 0, row 3)" "$T/out" &&
    ok "a null names its row group and row" || bad "null detail: $(grep -m1 null "$T/out")"
"$MKS" lint "$FX/bignull.parquet" > "$T/out" 2> /dev/null
grep -q "bignull.parquet:2501 @0  field 'text' is null (row group 0, row 2500)" "$T/out" &&
    ok "a null past the first 1024-row batch: its row in the row group" || bad "bignull: $(grep -m1 null "$T/out")"
read -r kept nullish < "$FX/nullstruct.count"
"$MKS" lint --json --field meta.body "$FX/nullstruct.parquet" > "$T/ln.json" 2> /dev/null
python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(0 if r['documents'] == int(sys.argv[2]) and r['records'] == int(sys.argv[2]) + int(sys.argv[3]) else 1)
" "$T/ln.json" "$kept" "$nullish" && ok "null structs and null strings under a struct: $nullish missing, $kept kept" ||
    bad "nullstruct: $(head -c 300 "$T/ln.json")"
"$MKS" lint "$FX/notstring.parquet" > "$T/out" 2>&1
[ $? = 2 ] && grep -q "field 'text' is int64, not a string" "$T/out" && ok "an int64 column: field-not-string" ||
    bad "notstring: $(head -8 "$T/out")"
"$MKS" lint --field nope "$FX/codec/none.parquet" > "$T/out" 2>&1
[ $? = 2 ] && grep -q "no field 'nope'" "$T/out" && ok "--field nope: field-missing" || bad "missing column: $(head -8 "$T/out")"
"$MKS" lint "$FX/empty.parquet" > "$T/out" 2>&1 && ok "an empty Parquet file: no records, exit 0" ||
    bad "empty.parquet: $(head -3 "$T/out")"

# build: the same shards as the JSONL
B=(-t gpt2 -L 64 -j 2 --val-fraction 0.1)
"$MKS" build "${B[@]}" -o "$T/b_plain" "$IN" > /dev/null 2>&1 || bad "build plain"
same_shards() { # A B NAME
    local d=0 n=0
    for s in "$1"/*.mks; do
        n=$((n + 1))
        cmp -s "$s" "$2/$(basename "$s")" || d=1
    done
    [ "$n" -gt 0 ] && [ $d = 0 ] && [ "$(ls "$1"/*.mks | wc -l)" = "$(ls "$2"/*.mks 2> /dev/null | wc -l)" ] && ok "$3" ||
        bad "$3"
}
for f in codec/none codec/snappy codec/zstd codec/gzip codec/brotli codec/lz4 types/large_string types/string_view \
    types/dict ipc/file ipc/stream ipc/file_zstd ipc/stream_lz4 ipc/large ipc/dict; do
    ext=parquet
    [ "${f%%/*}" = ipc ] && ext=arrow
    n=$(echo "$f" | tr / _)
    "$MKS" build "${B[@]}" -o "$T/b_$n" "$FX/$f.$ext" > /dev/null 2> "$T/err" || bad "build $f.$ext: $(head -2 "$T/err")"
    same_shards "$T/b_plain" "$T/b_$n" "build $f.$ext: shards identical to .jsonl"
done
"$MKS" build "${B[@]}" --field meta.body -o "$T/b_struct" "$FX/struct.parquet" > /dev/null 2>&1 || bad "build struct"
same_shards "$T/b_plain" "$T/b_struct" "build struct.parquet --field meta.body: shards identical to .jsonl"
"$MKS" build "${B[@]}" -o "$T/b_nulls" "$FX/nulls.parquet" > /dev/null 2>&1
rc=$?
nrej=$(grep -c '"field-missing"' "$T/b_nulls/rejects.jsonl" 2> /dev/null)
[ "$nrej" = "$n_null" ] && grep -q '"file":"[^"]*nulls.parquet"' "$T/b_nulls/rejects.jsonl" &&
    ok "build nulls.parquet (exit $rc): $nrej field-missing reject lines naming the file" ||
    bad "build nulls: exit $rc, $nrej rejects: $(head -c 300 "$T/b_nulls/rejects.jsonl" 2> /dev/null)"
same_shards "$T/b_plain" "$T/b_nulls" "build nulls.parquet: the non-null documents = the .jsonl shards"

# a folder: --part 1/2 + 2/2 + merge = one build = the JSONL
"$MKS" build "${B[@]}" -o "$T/b_dir" "$FX/folder" > /dev/null 2>&1 || bad "build folder"
"$MKS" build "${B[@]}" -o "$T/b_dir_jsonl" "$FX/folder_jsonl" > /dev/null 2>&1 || bad "build folder of .jsonl"
same_shards "$T/b_dir_jsonl" "$T/b_dir" "build a folder of .parquet: shards identical to the folder as .jsonl"
"$MKS" build "${B[@]}" --part 1/2 -o "$T/p1" "$FX/folder" > /dev/null 2>&1 || bad "build --part 1/2"
"$MKS" build "${B[@]}" --part 2/2 -o "$T/p2" "$FX/folder" > /dev/null 2>&1 || bad "build --part 2/2"
"$MKS" merge --out "$T/merged" "$T/p1" "$T/p2" > /dev/null 2>&1 || bad "merge"
same_shards "$T/b_dir" "$T/merged" "folder of .parquet: --part 1/2 + 2/2 + merge = one build"
"$MKS" build "${B[@]}" -o "$T/b_dir" "$FX/folder" > "$T/out" 2>&1 && grep -q "up to date" "$T/out" &&
    ok "rebuild of a .parquet folder: up to date" || bad "rebuild: $(head -2 "$T/out")"

# tokenizer train: the same vocabulary
"$MKS" tokenizer train --vocab-size 300 --out "$T/v_plain.tiktoken" "$IN" > /dev/null 2>&1
if "$MKS" tokenizer train --vocab-size 300 --out "$T/v_pq.tiktoken" "$FX/codec/brotli.parquet" > /dev/null 2>&1 &&
    cmp -s "$T/v_pq.tiktoken" "$T/v_plain.tiktoken"; then
    ok "tokenizer train from .parquet = from .jsonl"
else
    bad "tokenizer train from .parquet differs"
fi

# --resume after kill -9: the shared corpus in 2 files of 100-row row groups
if command -v zstd > /dev/null && [ -f "$SHARED/corpus/web.jsonl.zst" ]; then
    zstd -dc "$SHARED/corpus/web.jsonl.zst" > "$T/web.jsonl"
    "$PY" "$SRC/tests/make_arrow_fixtures.py" "$T/web.jsonl" "$T/big" --split 2 100 || bad "split"
    K=(-t gpt2 -L 512 --val-fraction 0.02 --shard-tokens 128K --batch-bytes 256K)
    export MKS_CHECKPOINT_SECONDS=0
    t0=$(date +%s%N)
    "$MKS" build "${K[@]}" -j 1 -o "$T/k_ref" "$T/big/parquet" > /dev/null 2>&1 || bad "reference build"
    dur_ms=$((($(date +%s%N) - t0) / 1000000))
    "$MKS" build "${K[@]}" -j 1 -o "$T/k_json" "$T/big/jsonl" > /dev/null 2>&1
    same_shards "$T/k_json" "$T/k_ref" "the corpus as .parquet (2 files, 100-row row groups) = as .jsonl"
    RANDOM=4242
    kills=0
    for i in 1 2 3 4 5; do
        ms=$((20 + RANDOM % (dur_ms * 6 / 10 + 1)))
        "$MKS" build "${K[@]}" -j 2 --resume -o "$T/k_out" "$T/big/parquet" \
            2>> "$T/k_err" > /dev/null &
        pid=$!
        sleep "$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))"
        kill -9 $pid 2> /dev/null && kills=$((kills + 1))
        wait $pid 2> /dev/null
    done
    "$MKS" build "${K[@]}" -j 2 --resume -o "$T/k_out" "$T/big/parquet" \
        > /dev/null 2>> "$T/k_err" || bad "resume"
    if [ $kills -ge 1 ] && grep -q "resuming after" "$T/k_err" && diff -r -x manifest.json "$T/k_ref" "$T/k_out" > /dev/null; then
        ok "--resume after $kills kill -9: shards byte-identical to one build ($dur_ms ms reference)"
    else
        bad "resume after $kills kills: $(grep -c "resuming after" "$T/k_err") resumes; $(diff -r -x manifest.json "$T/k_ref" "$T/k_out" | head -3)"
    fi
fi

# damage: a finding / reject line naming the file, exit 2, no crash
"$PY" - "$FX/codec/none.parquet" "$FX/ipc/file.arrow" "$FX/ipc/stream.arrow" "$T" << 'EOF'
import sys
pq, af, ast, t = sys.argv[1:5]
d = open(pq, "rb").read()
open(t + "/trunc.parquet", "wb").write(d[: len(d) // 2])
open(t + "/footer.parquet", "wb").write(d[:-8] + (0x7FFFFFF0).to_bytes(4, "little") + b"PAR1")
# a page's bytes flipped: the page checksum (written by the fixture) catches it
b = bytearray(d)
b[200] ^= 0x55
open(t + "/flip.parquet", "wb").write(bytes(b))
a = open(af, "rb").read()
open(t + "/trunc.arrow", "wb").write(a[: len(a) - 40])
s = open(ast, "rb").read()
open(t + "/cut_stream.arrow", "wb").write(s[: len(s) * 2 // 3])
EOF
for c in "trunc.parquet:parquet: " "footer.parquet:parquet: " "flip.parquet:parquet: " "trunc.arrow:arrow: " \
    "cut_stream.arrow:arrow: "; do
    n=${c%%:*}
    want=${c#*:}
    "$MKS" lint "$T/$n" > "$T/out" 2>&1
    rc=$?
    if [ $rc = 2 ] && grep -q "zstd-corrupt" "$T/out" && grep -qE "$n:[0-9]+ @0  $want" "$T/out"; then
        ok "lint $n: exit 2, zstd-corrupt at file:row: $(grep -m1 -o "$want.*" "$T/out" | head -c 100)"
    else
        bad "lint $n: exit $rc: $(grep -m2 "@" "$T/out")"
    fi
    "$MKS" build "${B[@]}" -o "$T/d_$n" "$T/$n" > /dev/null 2> "$T/err"
    rc=$?
    if [ $rc -le 2 ] && grep -q "\"zstd-corrupt\"" "$T/d_$n/rejects.jsonl" 2> /dev/null &&
        grep -q "$n" "$T/d_$n/rejects.jsonl"; then
        ok "build $n: exit $rc, reject line names the file"
    else
        bad "build $n: exit $rc, rejects: $(head -c 300 "$T/d_$n/rejects.jsonl" 2> /dev/null) $(head -2 "$T/err")"
    fi
done
finish
