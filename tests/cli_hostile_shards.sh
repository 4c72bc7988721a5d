#!/usr/bin/env bash
# cli_hostile_shards.sh MKSHARDS SHARED_DIR DATA_DIR GEN - mkshards verify /
# inspect / merge on hostile shard sets (issue 12 items 1, 2, 3, 5, 8, 13, 14,
# 15): every case checks the exit code AND the message; `timeout 10` turns a
# hang (FIFO) into a failure. GEN is tests/hostile_shards_gen.c: it crafts
# shard bytes with recomputed checksums; JSON edits use python3 (stdlib).
set -u
MKS=$1
GEN=$4
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ -x "$GEN" ] || { echo "skip: no generator at $GEN"; exit 77; }
command -v python3 >/dev/null || { echo "skip: no python3"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$ROOT/tests/cli_check.sh"
# jedit DIR PYTHON: edit DIR/manifest.json with the expression (m = manifest)
jedit() {
    python3 - "$1/manifest.json" "$2" <<'PY'
import json, sys
p, code = sys.argv[1], sys.argv[2]
m = json.load(open(p))
exec(code)
open(p, "w").write(json.dumps(m, indent=2))
PY
}
fresh() { rm -rf "$T/$2"; cp -r "$T/$1" "$T/$2"; }

"$MKS" tokenizer train --vocab-size 512 --out "$T/tok.tiktoken" -s '<|endoftext|>' -q "$ROOT/samples/tiny.jsonl" 2>/dev/null ||
    { bad "tokenizer train"; exit 1; }
mkdir "$T/in"
head -100 "$ROOT/samples/tiny.jsonl" >"$T/in/a.jsonl"
tail -100 "$ROOT/samples/tiny.jsonl" >"$T/in/b.jsonl"
B=(-t "$T/tok.tiktoken" -L 33 --val-fraction 0.05 --shard-tokens 2000 -q)
"$MKS" build "${B[@]}" -o "$T/set" "$T/in" || { bad "build"; exit 1; }
"$MKS" build "${B[@]}" --part 1/2 -o "$T/p1" "$T/in" && "$MKS" build "${B[@]}" --part 2/2 -o "$T/p2" "$T/in" ||
    { bad "build parts"; exit 1; }
"$MKS" build -t "$T/tok.tiktoken" -L 17 --val-fraction 0.05 --shard-tokens 2000 -q -o "$T/l17" "$T/in" || { bad "build L17"; exit 1; }
run 0 "valid set verifies" -- "$MKS" verify "$T/set"
# DIR/ as typed (README: inspect shards/): the shard is DIR/NAME, no double slash
"$MKS" inspect "$T/set/" >"$T/insp" 2>&1 && grep -qxF "header of $T/set/train-00000.mks:" "$T/insp" &&
    ok "inspect DIR/: header of DIR/train-00000.mks" || bad "inspect DIR/: $(grep 'header of' "$T/insp")"
run 64 "inspect --split: the names from the library's table" "--split expects train or val, got 'test'" -- "$MKS" inspect --split test "$T/set"
run 0 "merge of valid parts" -- "$MKS" merge -q --out "$T/merged" "$T/p1" "$T/p2"
cmp -s "$T/merged/manifest.json" "$T/set/manifest.json" && ok "merge == single build" || bad "merge differs from a single build"
S0=train-00000.mks

# ---- item 1: the 264-byte wrap-around shard
"$GEN" overflow "$T/ov.mks"
run 2 "verify: 264-byte overflow shard" "ov.mks" "exceed 4294967295 tokens per shard" -- "$MKS" verify "$T/ov.mks"
run 2 "inspect: 264-byte overflow shard" "ov.mks" "exceed 4294967295 tokens per shard" -- "$MKS" inspect "$T/ov.mks"
fresh set ovset && cp "$T/ov.mks" "$T/ovset/$S0" && "$GEN" rehash "$T/ovset"
run 2 "verify: overflow shard, manifest xxh3 matches" "$S0" "exceed 4294967295 tokens per shard" -- "$MKS" verify "$T/ovset"
run 2 "inspect: overflow shard, manifest xxh3 matches" "$S0" "exceed 4294967295 tokens" -- "$MKS" inspect "$T/ovset"
run 2 "inspect --row: overflow shard (ds_shardset_open)" "$S0" -- "$MKS" inspect --ids --row 0 "$T/ovset"

# ---- item 15: header fields
hcase() { # WHAT OFF WIDTH VALUE PATTERN
    cp "$T/set/$S0" "$T/h.mks" && "$GEN" patch "$T/h.mks" "$2" "$3" "$4"
    run 2 "verify: $1" "$5" -- "$MKS" verify "$T/h.mks"
    run 2 "inspect: $1" "$5" -- "$MKS" inspect "$T/h.mks"
}
hcase "header size 64" 12 4 64 "offset 12: header size 64"
hcase "EOT id 0xFFFFFFFF" 36 4 0xFFFFFFFF "offset 36: EOT id 4294967295 >= vocab size"
hcase "pad id = vocab" 32 4 512 "pad id"
hcase "frame rows on an uncompressed shard" 40 4 64 "frame fields"
hcase "frame count on an uncompressed shard" 56 8 1 "frame fields"
hcase "unknown flag bit" 20 4 0x10 "unknown flag bits"
hcase "row length 2^31" 24 4 0x80000000 "row length 2147483648"

# ---- item 5: a corrupted valid[] entry with checksums recomputed
cp "$T/set/$S0" "$T/v.mks"
tb=$(python3 -c "import struct,sys; print(struct.unpack_from('<Q', open(sys.argv[1],'rb').read(), 72)[0])" "$T/v.mks")
"$GEN" patch "$T/v.mks" $((192 + tb + 4)) 4 1000 payload
run 2 "inspect SHARD: corrupt valid[1]" "row 1: row metadata corrupt" -- "$MKS" inspect "$T/v.mks"
run 2 "verify SHARD: corrupt valid[1]" "row 1 claims 1000 valid tokens" -- "$MKS" verify "$T/v.mks"
grep -q "tokens .* real" "$T/out" && bad "inspect printed counts for a corrupt shard" || true

# ---- item 5: manifests with missing / mistyped fields
mcase() { # WHAT PYTHON PATTERN [CMDS]
    fresh set m && jedit "$T/m" "$2"
    run 2 "inspect: $1" "$3" -- "$MKS" inspect "$T/m"
    run 2 "verify: $1" "$3" -- "$MKS" verify "$T/m"
}
mcase "no config.pack" "del m['config']['pack']" "config.pack"
mcase "no config" "del m['config']" "no config"
mcase "hist of 70 entries" "m['accounting']['doc_tokens_log2_hist'] = [1]*70" "doc_tokens_log2_hist has 70 entries"
mcase "seq_len a string" "m['seq_len'] = '33'" '"seq_len" must be an integer'
mcase "vocab_size a string" "m['tokenizer']['vocab_size'] = '512'" "vocab_size"
mcase "negative rows" "m['shards'][0]['rows'] = -1" '"rows" must be an integer'
mcase "huge tokens" "m['shards'][0]['tokens'] = 2**62" '"tokens" must be an integer'
mcase "accounting counter a string" "m['accounting']['records'] = 'x'" "accounting.records"
mcase "tokenizer.name missing" "del m['tokenizer']['name']" "tokenizer.name"
mcase "config.part [0, 1]" "m['config']['part'] = [0, 1]" "config.part"

# ---- items 13, 14: shard names and a shard listed twice
mcase "'../' in a shard name" "m['shards'][0]['file'] = '../set/$S0'" "is not a plain file name"
mcase "absolute shard name" "m['shards'][0]['file'] = '$T/set/$S0'" "is not a plain file name"
mcase "shard listed twice" "m['shards'].insert(1, dict(m['shards'][0]))" "$S0 is listed twice"
fresh set m && ln "$T/m/$S0" "$T/m/train-00099.mks" && jedit "$T/m" "e = dict(m['shards'][0]); e['file'] = 'train-00099.mks'; m['shards'].insert(1, e); m['splits']['train']['shards'] += 1; m['splits']['train']['rows'] += e['rows']; m['splits']['train']['tokens'] += e['tokens']"
run 2 "verify: one file under two names" "are the same file" -- "$MKS" verify "$T/m"

# ---- item 8: FIFOs and other special files
fresh set f && rm "$T/f/$S0" && mkfifo "$T/f/$S0"
run 2 "verify: FIFO as a shard" "$S0: not a regular file" -- "$MKS" verify "$T/f"
run 2 "inspect: FIFO as a shard" "$S0: not a regular file" -- "$MKS" inspect "$T/f"
run 2 "verify FIFO directly" "not a regular file" -- "$MKS" verify "$T/f/$S0"
run 2 "inspect FIFO directly" "not a regular file" -- "$MKS" inspect "$T/f/$S0"
fresh set f2 && rm "$T/f2/manifest.json" && mkfifo "$T/f2/manifest.json"
run 2 "verify: FIFO as manifest.json" "manifest.json: not a regular file" -- "$MKS" verify "$T/f2"
run 2 "inspect: FIFO as manifest.json" "manifest.json: not a regular file" -- "$MKS" inspect "$T/f2"
run 0 "inspect SHARD next to a FIFO manifest" -- "$MKS" inspect "$T/f2/$S0"
fresh p1 fp && rm "$T/fp/manifest.json" && mkfifo "$T/fp/manifest.json"
run 2 "merge: FIFO as a part's manifest.json" "manifest.json: not a regular file" -- "$MKS" merge -q --out "$T/mo" "$T/fp" "$T/p2"
fresh p1 fp && rm "$T/fp/$S0" && mkfifo "$T/fp/$S0"
run 2 "merge: FIFO as a part's shard" "$S0: not a regular file" -- "$MKS" merge -q --out "$T/mo" "$T/fp" "$T/p2"
fresh p1 fp && rm "$T/fp/rejects.jsonl" && mkfifo "$T/fp/rejects.jsonl"
run 2 "merge: FIFO as a part's rejects.jsonl" "rejects.jsonl" -- "$MKS" merge -q --out "$T/mo" "$T/fp" "$T/p2"

# ---- issue 32: inspect --row opens no path from inside a file: the tokenizer the
# manifest records (config.tokenizer) is only named, escaped; --tokenizer decodes
run 0 "inspect --row: the manifest's tokenizer is not opened" "give --tokenizer" "$T/tok.tiktoken', not opened" -- \
    "$MKS" inspect --row 0 "$T/set"
grep -q '^    "' "$T/out" && bad "inspect --row decoded with the manifest's tokenizer" || ok "inspect --row without --tokenizer: ids"
run 0 "inspect SHARD --row: the sibling manifest's tokenizer is not opened" "not opened" -- "$MKS" inspect --row 0 "$T/set/$S0"
grep -q '^    "' "$T/out" && bad "inspect SHARD --row decoded with the manifest's tokenizer" || ok "inspect SHARD --row: ids"
run 0 "inspect --row --tokenizer decodes" -- "$MKS" inspect --row 0 -t "$T/tok.tiktoken" "$T/set"
grep -q '^    "' "$T/out" && ok "inspect --row --tokenizer: text" || bad "inspect --row --tokenizer: no text: $(head -c 300 "$T/out")"
mkfifo "$T/tokfifo"
fresh set ti && jedit "$T/ti" "m['config']['tokenizer'] = '$T/tokfifo'"
run 0 "inspect --row: manifest names a FIFO tokenizer" "not opened" -- "$MKS" inspect --row 0 "$T/ti"
jedit "$T/ti" "m['config']['tokenizer'] = '$T/tok\\x1b]0;owned\\x07.tiktoken'.encode().decode('unicode_escape')"
run 0 "inspect --row: control bytes in the recorded path escaped" "tok\x1b]0;owned\x07.tiktoken" -- "$MKS" inspect --row 0 "$T/ti"
grep -q $'\x1b' "$T/err" && bad "inspect printed a raw ESC from the manifest" || ok "no raw ESC on stderr"

# ---- item 2: config.part of the parts
pcase() { # WHAT PART PATTERN
    fresh p1 pp && jedit "$T/pp" "m['config']['part'] = $2"
    run 2 "merge: part $2" "$T/pp" "$3" -- "$MKS" merge -q --out "$T/mo" "$T/pp" "$T/p2"
}
pcase "k = 0" "[0, 2]" "config.part must be [K, N]"
pcase "k > n" "[3, 2]" "config.part must be [K, N]"
pcase "n = 0" "[1, 0]" "config.part must be [K, N]"
pcase "a string" "'1/2'" "config.part must be [K, N]"
pcase "k twice" "[2, 2]" "are both part 2/2"
run 2 "merge: a part missing" "is part 1/2 but 1 part folder(s) were given" -- "$MKS" merge -q --out "$T/mo" "$T/p1"

# ---- items 3, 13: part shards that disagree with their manifest
fresh p1 pp && cp "$T/l17/$S0" "$T/pp/$S0" && "$GEN" rehash "$T/pp"
run 2 "merge: shard with another row length (xxh3 rehashed)" "$T/pp/$S0" "disagrees" -- "$MKS" merge -q --out "$T/mo" "$T/pp" "$T/p2"
fresh p1 pp && cp "$T/p2/$S0" "$T/pp/$S0"
run 2 "merge: a shard swapped in from another part" "$T/pp/$S0" "file checksum" -- "$MKS" merge -q --out "$T/mo" "$T/pp" "$T/p2"
# (a swapped shard whose manifest entry is rewritten to match it, rows and
# tokens equal, is a consistent forgery: the manifest is the authority)
fresh p1 pp && jedit "$T/pp" "m['shards'][0]['file'] = '../p2/$S0'"
run 2 "merge: '../' in a part's shard name" "is not a plain file name" -- "$MKS" merge -q --out "$T/mo" "$T/pp" "$T/p2"
fresh p1 pp && jedit "$T/pp" "m['tokenizer']['fingerprint'] = '0'*64"
run 2 "merge: a part with another tokenizer" "other options or tokenizer" -- "$MKS" merge -q --out "$T/mo" "$T/pp" "$T/p2"
fresh p1 pp && fresh p2 pq && jedit "$T/pp" "m['tokenizer']['fingerprint'] = '0'*64" && jedit "$T/pq" "m['tokenizer']['fingerprint'] = '0'*64"
run 2 "merge: both parts claim another fingerprint" "tokenizer fingerprint disagrees" -- "$MKS" merge -q --out "$T/mo" "$T/pp" "$T/pq"
fresh p1 pp && jedit "$T/pp" "m['shards'][0]['tokens'] -= 1"
run 2 "merge: tokens off by one" "tokens disagrees" -- "$MKS" merge -q --out "$T/mo" "$T/pp" "$T/p2"
fresh p1 pp && jedit "$T/pp" "m['shards'][0]['split'] = 'val'"
run 2 "merge: split changed" "is listed where val-00000.mks belongs" -- "$MKS" merge -q --out "$T/mo" "$T/pp" "$T/p2"
[ -e "$T/mo/manifest.json" ] && bad "a refused merge wrote a manifest" || ok "no refused merge wrote a manifest"

# ---- issue 32 item 7: merge --out over another shard set is refused like build's
# (the set of another configuration keeps every file; --force replaces it)
fresh l17 o7 && (cd "$T/o7" && sha256sum ./*) >"$T/o7.sum"
run 2 "merge --out holding a set of another configuration" "'$T/o7' holds a build with a different configuration; use another --out or --force" -- \
    "$MKS" merge -q --out "$T/o7" "$T/p1" "$T/p2"
(cd "$T/o7" && sha256sum -c --quiet "$T/o7.sum" >/dev/null 2>&1) && [ -e "$T/o7/val-00000.mks" ] &&
    ok "the other set is untouched (its val shard and manifest kept)" || bad "merge changed the other set"
fresh set o7s
run 0 "merge --out holding the same configuration (a single build of it)" -- "$MKS" merge -q --out "$T/o7s" "$T/p1" "$T/p2"
cmp -s "$T/o7s/manifest.json" "$T/set/manifest.json" && ok "same-config set rewritten identically" || bad "same-config merge differs"
run 0 "merge again into its own output" -- "$MKS" merge -q --out "$T/merged" "$T/p1" "$T/p2"
run 0 "merge --force over the other set" -- "$MKS" merge -q --force --out "$T/o7" "$T/p1" "$T/p2"
diff -r -x .lock "$T/o7" "$T/merged" >/dev/null && ok "--force: the merged set, the other set's files gone" ||
    bad "--force merge differs from a fresh merge: $(diff -r "$T/o7" "$T/merged" | head -3)"
run 0 "verify the forced merge" -- "$MKS" verify "$T/o7"

# ---- issue 32 item 10: a document start verify refuses, every checksum and the
# manifest's xxh3 recomputed: every reader refuses the row, naming it
"$MKS" build -t "$T/tok.tiktoken" -L 1024 -q -o "$T/dm" "$T/in" || bad "build L1024"
# the first row with two document starts: its second start set to its first
# (not strictly increasing); prints ROW OFFSET VALUE
read -r drow doff dval < <(python3 - "$T/dm/$S0" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
n, = struct.unpack_from("<Q", b, 48); tb, = struct.unpack_from("<Q", b, 72)
v0 = 192 + tb; s0 = v0 + 4 * n; st0 = s0 + 4 * (n + 1)
sidx = struct.unpack_from("<%dI" % (n + 1), b, s0)
r = next(r for r in range(n) if sidx[r + 1] - sidx[r] >= 2)
print(r, st0 + 4 * (sidx[r] + 1), struct.unpack_from("<I", b, st0 + 4 * sidx[r])[0])
PY
)
"$GEN" patch "$T/dm/$S0" "$doff" 4 "$dval" payload && "$GEN" rehash "$T/dm"
run 2 "verify: a document start out of order (checksums recomputed)" "$S0: offset $doff: row $drow document start $dval invalid" -- "$MKS" verify "$T/dm"
run 2 "inspect SHARD: the same row" "row $drow" -- "$MKS" inspect "$T/dm/$S0"
run 2 "inspect --row: the same row" -- "$MKS" inspect --ids --row "$drow" "$T/dm/$S0"
LLM=$(dirname "$MKS")/llmtrain/llmtrain
if [ -x "$LLM" ]; then
    # one epoch of the 114 rows (8 rows of T=64 a step) reads the bad row
    run 2 "llmtrain --doc-mask: the same row" "$S0 row $drow" "document start $dval invalid" -- \
        "$LLM" --data "$T/dm" --model tiny --seq-len 64 --steps 16 --token-budget 512 --batch-tokens 512 --quiet --doc-mask
    run 2 "llmtrain --no-verify: the same row" "document start $dval invalid" -- \
        "$LLM" --data "$T/dm" --model tiny --seq-len 64 --steps 16 --token-budget 512 --batch-tokens 512 --quiet --no-verify
else
    echo "skip: no llmtrain at $LLM"
fi

# ---- issue 28 item 3: version-2 shards (a loss bit per token), made from the real build
fresh set ls && "$GEN" lossify "$T/ls" || bad "lossify"
run 0 "verify: version-2 set" -- "$MKS" verify "$T/ls"
# out_has WHAT PATTERN...: the last run's stdout holds every pattern
out_has() {
    local what=$1; shift
    for p in "$@"; do grep -qF -- "$p" "$T/out" || { bad "$what: output lacks '$p': $(head -c 300 "$T/out")"; return; }; done
    ok "$what: output has $*"
}
run 0 "inspect: version-2 set" -- "$MKS" inspect "$T/ls"
out_has "inspect: targets per split" "targets (loss bits)"
run 0 "inspect --row 0: version 2" -- "$MKS" inspect --ids --row 0 "$T/ls"
out_has "inspect --row: masked spans in brackets" "targets; [bracketed] spans are not targets" " ["
run 0 "inspect SHARD: version 2" -- "$MKS" inspect "$T/ls/$S0"
out_has "inspect SHARD: loss section and targets" "loss bytes" "targets "
# a loss bit on a padding position of the first row with padding, checksums and manifest recomputed,
# in a --pack none set (every row padded, one shard: llmtrain's 16 steps read every row)
"$MKS" build -t "$T/tok.tiktoken" -L 1024 --pack none --val-fraction 0 --shard-tokens 1000000 -q -o "$T/lsn" "$T/in" &&
    "$GEN" lossify "$T/lsn" || bad "build + lossify --pack none"
read -r pfile prow < <(python3 - "$T/lsn" <<'PY'
import glob, os, struct, sys
for f in sorted(glob.glob(sys.argv[1] + "/*.mks")):
    b = open(f, "rb").read()
    n, = struct.unpack_from("<Q", b, 48); L, = struct.unpack_from("<I", b, 24)
    tb, mb = struct.unpack_from("<QQ", b, 72)
    valid = struct.unpack_from("<%dI" % n, b, 192 + tb)
    r = next((r for r in range(n) if valid[r] < L), None)
    if r is not None:
        print(os.path.basename(f), r)
        break
PY
)
[ -n "$pfile" ] || bad "no shard with a padded row in the version-2 set"
# the last position of every padded row (the first llmtrain batch meets one, even under ASan's pace)
fresh lsn lp && python3 - "$T/lp/$pfile" <<'PY'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n, = struct.unpack_from("<Q", b, 48); L, = struct.unpack_from("<I", b, 24)
tb, mb = struct.unpack_from("<QQ", b, 72)
valid = struct.unpack_from("<%dI" % n, b, 192 + tb)
for r in range(n):
    if valid[r] < L:
        b[192 + tb + mb + r * ((L + 7) // 8) + (L - 1) // 8] |= 1 << ((L - 1) % 8)
open(p, "wb").write(b)
PY
# (patching the version field with its own value 2 recomputes the checksums)
"$GEN" patch "$T/lp/$pfile" 8 4 2 payload && "$GEN" rehash "$T/lp"
run 2 "verify: a loss bit on padding (checksums recomputed)" "$pfile" "row $prow has a loss bit set on padding" -- "$MKS" verify "$T/lp"
run 2 "inspect --row: the same row" "row $prow has a loss bit set on padding" -- "$MKS" inspect --ids --row "$prow" "$T/lp/$pfile"
fresh ls lz && "$GEN" patch "$T/lz/$S0" 144 8 1 && "$GEN" rehash "$T/lz"
run 2 "verify: loss section size wrong" "$S0" "offset 144: loss section of 1 bytes" -- "$MKS" verify "$T/lz"
fresh ls lm && jedit "$T/lm" 'm["shard_format_version"] = 1'
run 2 "verify: manifest version 1 over version-2 shards" "shard version (shard_format_version) disagrees" -- "$MKS" verify "$T/lm"
fresh ls lt && jedit "$T/lt" 'm["shards"][0]["loss_tokens"] += 1'
run 2 "verify: loss_tokens off by one" "$S0: loss_tokens disagrees" -- "$MKS" verify "$T/lt"
# a loss byte flipped, checksums left as they were
fresh ls lc && python3 - "$T/lc/$S0" <<'PY'
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
tb, mb = struct.unpack_from("<QQ", b, 72)
b[192 + tb + mb] ^= 1
open(p, "wb").write(b)
PY
"$GEN" rehash "$T/lc"
run 2 "verify: a loss bit flipped (stale block checksums)" "$S0" "checksum mismatch" "loss section" -- "$MKS" verify "$T/lc"
# a real chat build (Qwen2's tokenizer.json, ChatML): version 2 from the CLI, --part + merge = one build, bits shown
QW=$2/vocab/hf/qwen2
if [ -d "$QW" ]; then
    C=(-t "$QW" --format chat --chat-template chatml -L 64 --pack bfd --val-fraction 0.2 --shard-tokens 512 -q)
    CIN=("$ROOT/tests/data/chat/cli_llama3.jsonl" "$ROOT/tests/data/chat/cli_qwen2.5.jsonl")
    "$MKS" build "${C[@]}" -o "$T/cw" "${CIN[@]}" && "$MKS" build "${C[@]}" --part 1/2 -o "$T/cp1" "${CIN[@]}" &&
        "$MKS" build "${C[@]}" --part 2/2 -o "$T/cp2" "${CIN[@]}" || bad "chat builds"
    run 0 "merge of version-2 parts" -- "$MKS" merge -q --out "$T/cm" "$T/cp1" "$T/cp2"
    diff -r "$T/cw" "$T/cm" >/dev/null && ok "chat: merge == single build (version 2)" || bad "chat: merge differs"
    run 0 "verify: chat set" -- "$MKS" verify "$T/cm"
    run 0 "inspect --row 0: chat set" -- "$MKS" inspect --row 0 --tokenizer "$QW" "$T/cw"
    out_has "inspect --row: the prompt in brackets, the answer outside" "targets; [bracketed]" '["<|im_start|>user' \
        '<|im_end|>" ["'
    python3 - "$T/cw/manifest.json" <<'PY' && ok "chat manifest: version 2, loss_tokens per shard and split, tokens.loss" ||
import json, sys
m = json.load(open(sys.argv[1]))
assert m["shard_format_version"] == 2
per = sum(s["loss_tokens"] for s in m["shards"])
assert 0 < per < sum(s["tokens"] for s in m["shards"])
assert per == sum(m["splits"][k]["loss_tokens"] for k in ("train", "val")) == m["accounting"]["tokens"]["loss"]
PY
        bad "chat manifest counts"
else
    echo "skip: no $QW for the chat build cases"
fi
if [ -x "$LLM" ]; then
    run 0 "llmtrain on a version-2 set" -- \
        "$LLM" --data "$T/ls" --model tiny --seq-len 32 --steps 1 --token-budget 256 --batch-tokens 256 --quiet
    run 2 "llmtrain: a loss bit on padding" "$pfile row" "loss bit set on padding" -- \
        "$LLM" --data "$T/lp" --model tiny --seq-len 32 --steps 16 --token-budget 512 --batch-tokens 512 --quiet --no-verify
    run 2 "llmtrain: manifest version 1 over version-2 shards" "shard version" -- \
        "$LLM" --data "$T/lm" --model tiny --seq-len 32 --steps 4 --token-budget 256 --batch-tokens 256 --quiet
fi

# ---- item 12: merge takes the same DIR/.lock as build
if command -v flock >/dev/null; then
    mkdir -p "$T/ml"
    echo 4242 >"$T/ml/.lock"
    # the holder execs into sleep, so killing $holder really drops the lock
    (exec 9>>"$T/ml/.lock" && flock -x 9 && exec sleep 30) &
    holder=$!
    for _ in $(seq 100); do flock -n -x "$T/ml/.lock" true 2>/dev/null || break; sleep 0.05; done
    run 2 "merge into a folder another run holds" "another build or merge holds $T/ml/.lock (pid 4242)" -- \
        "$MKS" merge -q --out "$T/ml" "$T/p1" "$T/p2"
    [ -e "$T/ml/manifest.json" ] && bad "a locked-out merge wrote a manifest" || ok "a locked-out merge wrote nothing"
    kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
    run 0 "merge once the holder is gone (stale .lock file)" -- "$MKS" merge -q --out "$T/ml" "$T/p1" "$T/p2"
    [ -e "$T/ml/.lock" ] && bad "merge left ml/.lock behind" || ok "no lock file left after a merge"
else
    echo "skip: no flock(1) for the merge lock case"
fi

exit $fail
