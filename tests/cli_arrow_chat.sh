#!/usr/bin/env bash
# cli_arrow_chat.sh MKSHARDS SHARED_DIR BUILD_DIR [PYTHON] - chat and
# prompt/completion records from Parquet / Arrow IPC columns (issues 28 +
# 29): messages = list<struct<role, content>>, prompt/completion strings or
# message lists, list-of-parts content, a struct column (--messages-field
# conv.messages). pyarrow writes each table beside the same rows as JSONL
# (tests/make_arrow_chat_fixtures.py); build, lint, hist and encode of the
# .parquet / .arrow must give what the .jsonl gives: identical shard bytes,
# manifest accounting, reject lines (but the file name), lint findings, the
# histogram, the ids and masks. Nulls and wrong types (content null, role
# int64, a list of no text part, a null messages list, invalid UTF-8 in a
# content) are the JSONL path's rejects / findings, one record each.
# Skipped in a build without Arrow (cli_arrow checks the refusal there).
set -uo pipefail
MKS=$1
SHARED=$2
BUILD=$3
PY=${4:-}
SRC=$(cd "$(dirname "$0")/.." && pwd)
Q=$SHARED/vocab/hf/qwen2/tokenizer.json
[ -f "$Q" ] || { echo "SKIP: no $Q"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/mks_arrow_chat.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }

printf 'PAR1 not really\n' > "$T/x.parquet"
if "$MKS" lint "$T/x.parquet" 2>&1 | grep -q MKS_ENABLE_ARROW; then
    echo "SKIP: a build without Arrow"
    exit 77
fi
has_pyarrow() { [ -n "$1" ] && "$1" -c 'import pyarrow, pyarrow.parquet' > /dev/null 2>&1; }
if ! has_pyarrow "$PY"; then
    PY=""
    for c in "$HOME/.local/share/mkshards/arrow-venv/bin/python" "$BUILD/arrow-venv/bin/python" python3; do
        has_pyarrow "$c" && { PY=$c; break; }
    done
fi
if [ -z "$PY" ]; then
    [ "${CI:-}" = true ] && { echo "FAIL - no python with pyarrow"; exit 1; }
    echo "SKIP: no python with pyarrow (make deps makes one)"
    exit 77
fi
"$PY" "$SRC/tests/make_arrow_chat_fixtures.py" "$T/fx" || { echo "FAIL - make_arrow_chat_fixtures.py"; exit 1; }
FX=$T/fx

# same_build A B NAME: every shard, the accounting, the reject lines (file
# names and offsets aside: a row has no byte offset, it is numbered as a line)
same_build() {
    local d=0 n=0
    for s in "$1"/*.mks; do
        [ -f "$s" ] || continue
        n=$((n + 1))
        cmp -s "$s" "$2/$(basename "$s")" || d=1
    done
    [ "$n" = "$(ls "$2"/*.mks 2> /dev/null | wc -l)" ] || d=1
    [ $d = 0 ] || { bad "$3: shards differ"; return; }
    if python3 - "$1" "$2" << 'EOF'; then
import json, os, re, sys
def acc(p):  # a build that rejects every record writes no manifest
    p += "/manifest.json"
    return json.load(open(p))["accounting"] if os.path.exists(p) else None
a, b = (acc(p) for p in sys.argv[1:3])
def rej(p):
    try:
        return [re.sub(r'"offset":[0-9]+', '', re.sub(r'"file":"[^"]*"', '"file":""', l))
                for l in open(p + "/rejects.jsonl")]
    except FileNotFoundError:
        return []
ra, rb = rej(sys.argv[1]), rej(sys.argv[2])
if a != b:
    print("accounting:", a, b)
if ra != rb:
    print("rejects:", ra[:2], rb[:2])
sys.exit(0 if a == b and ra == rb else 1)
EOF
        ok "$3: $n shard(s), accounting and $(wc -l < "$1/rejects.jsonl" 2> /dev/null || echo 0) reject line(s) identical"
    else
        bad "$3: manifest accounting or rejects differ"
    fi
}

B=(-t "$Q" --chat-template qwen2.5 -L 128 -j 2 --val-fraction 0.1 --shard-tokens 2K -q)
check() { # NAME FORMAT [ARGS...]: NAME.jsonl against NAME.parquet, NAME.arrow (and more inputs in INPUTS)
    local name=$1 fmt=$2
    shift 2
    "$MKS" build "${B[@]}" --format "$fmt" "$@" -o "$T/b_${name}_jsonl_$fmt" "$FX/$name.jsonl" > /dev/null 2> "$T/err"
    local rc0=$?
    [ $rc0 -le 2 ] || bad "build $name.jsonl: exit $rc0: $(head -3 "$T/err")"
    for f in "$FX/$name.parquet" "$FX/$name.arrow" ${INPUTS:-}; do
        local b
        b=$(basename "$f" | tr . _)
        "$MKS" build "${B[@]}" --format "$fmt" "$@" -o "$T/b_${b}_$fmt" "$f" > /dev/null 2> "$T/err"
        local rc=$?
        [ $rc = $rc0 ] || bad "build $(basename "$f"): exit $rc, .jsonl $rc0: $(head -3 "$T/err")"
        same_build "$T/b_${name}_jsonl_$fmt" "$T/b_${b}_$fmt" "build --format $fmt $* $(basename "$f") (exit $rc) = .jsonl"
    done
}
INPUTS="$FX/chat_stream.arrow $FX/chat_zstd.parquet" check chat chat
check chat auto
INPUTS="" check parts chat
INPUTS="" check pc prompt-completion
INPUTS="" check pc auto
INPUTS="" check pc_conv prompt-completion
INPUTS="" check nested chat --messages-field conv.messages
INPUTS="" check role_int chat --pack bfd --over-long drop-turns
INPUTS="" check tools chat -L 512 --shard-tokens 4K

# the rejects the JSONL path gives, one record each
R=$T/b_chat_parquet_chat/rejects.jsonl
for want in 'chat-bad-content: message 1: content is not a string' 'chat-not-list: messages is not a list' \
    "chat-unknown-role: unknown role 'bot'" '"reason":"utf8-invalid"\|json-malformed\|invalid UTF-8'; do
    if grep -q "$want" "$R"; then ok "chat.parquet: a reject for '$want'"; else bad "chat.parquet lacks '$want'"; fi
done
grep -q '"file":"[^"]*chat.parquet","line":4,' "$R" && ok "rejects number rows as lines (row 4: the null content)" ||
    bad "reject line numbers: $(head -c 300 "$R")"
[ "$(grep -c 'a message without role' "$T/b_role_int_parquet_chat/rejects.jsonl" 2> /dev/null)" = 5 ] &&
    ok "role int64: 5 rows, 5 chat-unknown-role rejects" || bad "role_int rejects"
grep -q 'content has no text part' "$T/b_parts_parquet_chat/rejects.jsonl" 2> /dev/null &&
    ok "parts: a list of no text part refused as in JSONL" || bad "parts reject"

# lint, hist, encode: the JSONL's findings, histogram, ids and masks
for f in chat.parquet chat_stream.arrow; do
    "$MKS" lint -t "$Q" --format chat --chat-template qwen2.5 --seq-len 128 --json "$FX/chat.jsonl" > "$T/l_a" 2> /dev/null
    ra=$?
    "$MKS" lint -t "$Q" --format chat --chat-template qwen2.5 --seq-len 128 --json "$FX/$f" > "$T/l_b" 2> /dev/null
    rb=$?
    if [ $ra = $rb ] && python3 - "$T/l_a" "$T/l_b" << 'EOF'; then
import json, re, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def strip(x):  # file names and offsets aside
    s = re.sub(r'"[^"]*(chat\.jsonl|chat\.parquet|chat_stream\.arrow)', '"F', json.dumps(x))
    return json.loads(re.sub(r'"offset": [0-9]+', '"offset": 0', s))
sys.exit(0 if strip(a) == strip(b) else 1)
EOF
        ok "lint --format chat $f = .jsonl (exit $rb, every finding)"
    else
        bad "lint $f: exit $rb vs $ra; $(diff "$T/l_a" "$T/l_b" | head -4)"
    fi
done
"$MKS" hist -t "$Q" --format chat --chat-template qwen2.5 "$FX/chat.jsonl" > "$T/h_a" 2> /dev/null
"$MKS" hist -t "$Q" --format chat --chat-template qwen2.5 "$FX/chat.parquet" > "$T/h_b" 2> /dev/null
cmp -s "$T/h_a" "$T/h_b" && ok "hist --format chat .parquet = .jsonl" || bad "hist differs: $(diff "$T/h_a" "$T/h_b" | head -4)"
for f in chat.jsonl chat.arrow; do
    "$MKS" encode -t "$Q" --format chat --chat-template qwen2.5 "$FX/$f" -o "$T/$f.ids" --mask-out "$T/$f.mask" \
        > /dev/null 2>&1
done
cmp -s "$T/chat.jsonl.ids" "$T/chat.arrow.ids" && cmp -s "$T/chat.jsonl.mask" "$T/chat.arrow.mask" &&
    [ -s "$T/chat.jsonl.ids" ] && ok "encode --format chat .arrow: ids and mask = .jsonl" || bad "encode ids/mask differ"

# a chat build from Parquet whose messages field names no column: every row a chat-no-messages reject
"$MKS" build "${B[@]}" --format chat --messages-field nope -o "$T/b_nope" "$FX/chat.parquet" > /dev/null 2>&1
n=$(grep -c "chat-no-messages: no field 'nope'" "$T/b_nope/rejects.jsonl" 2> /dev/null)
[ "$n" = 150 ] && ok "--messages-field nope: 150 rows, 150 chat-no-messages rejects" || bad "nope: $n rejects"

[ $fails = 0 ] && echo "cli_arrow_chat: all ok" || echo "cli_arrow_chat: $fails failure(s)"
[ $fails = 0 ]
