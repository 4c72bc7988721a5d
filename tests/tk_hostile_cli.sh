#!/usr/bin/env bash
# cli_tk_hostile: `mkshards encode -t <crafted>` exits 2 with a message naming
# the file, for a special id of 2^32-1 in a sidecar and for a FIFO given as
# the tokenizer (which must not block); trained vocabularies with 1024-byte
# tokens load; token texts with terminal escapes are printed escaped.
# Args: mkshards shared_dir data_dir.
set -u
M=$1
T=$(mktemp -d "${TMPDIR:-/tmp}/tk_hostile_cli.XXXXXX")
trap 'rm -rf "$T"' EXIT
fail=0
python3 - "$T" <<'PY'
import base64, json, sys
d = sys.argv[1]
with open(d + "/v.tiktoken", "w") as f:
    for b in range(256):
        f.write("%s %d\n" % (base64.b64encode(bytes([b])).decode(), b))
json.dump({"pattern": "gpt2", "special_tokens": {"<|endoftext|>": 4294967295}}, open(d + "/v.tiktoken.meta.json", "w"))
PY
echo '{"text":"hello"}' > "$T/in.jsonl"

# expect CODE PATTERN -- command...
expect() {
    local want=$1 pat=$2
    shift 3
    timeout 20 "$@" > "$T/out" 2> "$T/err"
    local rc=$?
    if [ "$rc" != "$want" ] || { [ -n "$pat" ] && ! grep -qF -- "$pat" "$T/err"; }; then
        echo "FAIL: $* -> exit $rc (want $want), stderr:"; cat "$T/err"; echo "(want it to contain: $pat)"
        fail=1
    fi
}

expect 2 "$T/v.tiktoken.meta.json: special token \"<|endoftext|>\": id 4294967295 out of range" -- \
    "$M" encode -t "$T/v.tiktoken" --ids-out "$T/ids.txt" "$T/in.jsonl"
mkfifo "$T/fifo.tiktoken"
expect 2 "$T/fifo.tiktoken: not a regular file" -- "$M" encode -t "$T/fifo.tiktoken" --ids-out "$T/ids.txt" "$T/in.jsonl"
rm "$T/v.tiktoken.meta.json"
mkfifo "$T/v.tiktoken.meta.json"
expect 2 "$T/v.tiktoken.meta.json: not a regular file" -- "$M" encode -t "$T/v.tiktoken" --ids-out "$T/ids.txt" "$T/in.jsonl"
# and the sane version loads
rm "$T/v.tiktoken.meta.json"
expect 0 "" -- "$M" encode -t "$T/v.tiktoken" --pattern gpt2 --ids-out "$T/ids.txt" "$T/in.jsonl"
if [ "$(cat "$T/ids.txt" 2>/dev/null)" != "[104,101,108,108,111]" ]; then
    echo "FAIL: ids of \"hello\" with the byte-only vocabulary: $(cat "$T/ids.txt" 2>/dev/null)"; fail=1
fi

# issue 32, item 12: what tokenizer train writes, mkshards loads. 1024 x 'a'
# documents give a 1024-byte token (its base64 ends in "=="; it used to be
# refused as 1026 bytes), and with --max-piece-bytes 4096 the trainer stops
# at 1024 bytes instead of writing a 2048-byte token no loader reads.
python3 - "$T" <<'PY2'
import json, sys
d = sys.argv[1]
with open(d + "/a1024.jsonl", "w") as f:
    for _ in range(20): f.write(json.dumps({"text": "a" * 1024}) + "\n")
with open(d + "/a2048.jsonl", "w") as f:
    for _ in range(20): f.write(json.dumps({"text": "a" * 2048}) + "\n")
with open(d + "/one.jsonl", "w") as f: f.write(json.dumps({"text": "a" * 1024}) + "\n")
PY2
expect 0 "" -- "$M" tokenizer train -q -n 266 -o "$T/t1024.tiktoken" "$T/a1024.jsonl"
expect 0 "" -- "$M" encode -t "$T/t1024.tiktoken" --ids-out "$T/ids.txt" "$T/one.jsonl"
[ "$(cat "$T/ids.txt" 2>/dev/null)" = "[265]" ] || { echo "FAIL: 1024 x a with the trained vocabulary: $(cat "$T/ids.txt" 2>/dev/null)"; fail=1; }
expect 0 "" -- "$M" tokenizer train -q -n 300 --max-piece-bytes 4096 -o "$T/t2048.tiktoken" "$T/a2048.jsonl"
expect 0 "" -- "$M" tokenizer info -t "$T/t2048.tiktoken"
grep -qx "ranks: 266" "$T/out" || { echo "FAIL: --max-piece-bytes 4096: $(grep ranks "$T/out"), want 266 (up to 1024 x a)"; fail=1; }
expect 64 "--max-token-bytes" -- "$M" tokenizer train -q -n 300 --max-token-bytes 1025 -o "$T/t.tiktoken" "$T/a1024.jsonl"
# a 1025-byte token in a rank file: refused, with its size
python3 - "$T" <<'PY2'
import base64, sys
d = sys.argv[1]
with open(d + "/t1025.tiktoken", "w") as f:
    for b in range(256): f.write("%s %d\n" % (base64.b64encode(bytes([b])).decode(), b))
    f.write("%s 256\n" % base64.b64encode(b"a" * 1025).decode())
PY2
expect 2 "t1025.tiktoken:257: a token of 1025 bytes, longer than 1024 bytes" -- \
    "$M" encode -t "$T/t1025.tiktoken" --pattern gpt2 --ids-out "$T/ids.txt" "$T/one.jsonl"

# issue 32, item 14: token texts with terminal escapes (ESC, BEL, C1 CSI)
# are printed escaped by tokenizer info, build's framing line and encode's
# list of specials, as load errors are.
python3 - "$T" "$3" <<'PY2'
import json, sys
d = json.load(open(sys.argv[2] + "/tk_hf/bl_added.json"))
bos, eos = "<s\x1b]0;owned\x07\x1b[31m>", "</s\u009b2J>"
for i, c in ((700, bos), (701, eos)):
    d["added_tokens"].append({"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": True})
d["post_processor"] = {"type": "TemplateProcessing", "pair": [], "special_tokens": {},
                       "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                                  {"SpecialToken": {"id": eos, "type_id": 0}}]}
json.dump(d, open(sys.argv[1] + "/esc.json", "w"))
with open(sys.argv[1] + "/docs.jsonl", "w") as f:
    for i in range(40): f.write(json.dumps({"text": "hello world number %d and more" % i}) + "\n")
PY2
raw_esc() { # NAME: no raw ESC, BEL or C1 CSI in $T/out + $T/err, and the escaped form there
    if LC_ALL=C grep -qP '\x1b|\x07|\xc2\x9b' "$T/out" "$T/err"; then echo "FAIL: $1 printed a raw terminal escape"; fail=1; fi
    if ! cat "$T/out" "$T/err" | grep -qF '<s\x1b]0;owned\x07\x1b[31m>'; then echo "FAIL: $1 does not show the escaped token"; fail=1; fi
}
expect 0 "" -- "$M" tokenizer info -t "$T/esc.json"
raw_esc "tokenizer info"
grep -qF 'EOS </s\xc2\x9b2J> (701)' "$T/out" || { echo "FAIL: tokenizer info framing line: $(grep framing "$T/out")"; fail=1; }
expect 0 "documents framed as BOS <s" -- "$M" build -t "$T/esc.json" --seq-len 16 -o "$T/shards" "$T/docs.jsonl"
raw_esc "build"
expect 0 "" -- bash -c 'for r in 0 1 2 3 4 5 6 7; do "$0" inspect --row $r -t "$1" "$2" || exit; done' \
    "$M" "$T/esc.json" "$T/shards"
raw_esc "inspect --row"
grep -qF '</s\xc2\x9b2J>' "$T/out" || { echo "FAIL: inspect --row does not show the escaped EOS"; fail=1; }
expect 64 "is not a special token" -- "$M" encode -t "$T/esc.json" --allow-special nope --ids-out - "$T/docs.jsonl"
raw_esc "encode --allow-special"

[ "$fail" = 0 ] && echo "cli_tk_hostile: ok"
exit $fail
