#!/usr/bin/env bash
# cli_tk_hostile: `mkshards encode -t <crafted>` exits 2 with a message naming
# the file, for a special id of 2^32-1 in a sidecar and for a FIFO given as
# the tokenizer (which must not block). Args: mkshards shared_dir data_dir.
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
[ "$fail" = 0 ] && echo "cli_tk_hostile: ok"
exit $fail
