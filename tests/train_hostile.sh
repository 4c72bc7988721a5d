#!/usr/bin/env bash
# train_hostile.sh MKSHARDS SHARED_DIR DATA_DIR GEN - llmtrain on hostile
# inputs (issue 12), every check with its exit code and message:
#   FIFOs in place of ckpt.bin / manifest.json / a shard fail fast (timeout 10);
#   a checkpoint with appended bytes, a truncated one, absurd count/size fields;
#   --log naming the manifest / a shard / the checkpoint / the tokenizer and
#   --ckpt-dir inside the data folder are refused (exit 64) with the inputs
#   unchanged; strict numeric options (exit 64 naming option and value);
#   a shard whose header vocabulary differs from the manifest, ids beyond the
#   vocabulary in a train / val row (exit 2 naming the shard and row); a shard
#   listed twice in the manifest.
# GEN is tests/train_hostile_gen.c (crafts the files; nothing is committed).
# A 5th argument "set" runs only the checks that ds_shardset_open answers
# (shard listed twice, FIFO manifest / shard): test cli_train_hostile_set.
set -u
MKS=$1
GEN=$4
PART=${5:-train}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LLM=${LLMTRAIN:-$(dirname "$MKS")/llmtrain/llmtrain}
[ -x "$LLM" ] || { echo "skip: no llmtrain at $LLM"; exit 77; }
[ -x "$GEN" ] || { echo "skip: no generator at $GEN"; exit 77; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$ROOT/tests/cli_check.sh"

"$MKS" tokenizer train --vocab-size 512 --out "$T/tok.tiktoken" -s '<|endoftext|>' -q "$ROOT/samples/tiny.jsonl" 2>/dev/null ||
    { bad "tokenizer train"; exit 1; }
"$MKS" build -t "$T/tok.tiktoken" -L 33 -o "$T/shards" --val-fraction 0.05 -q "$ROOT/samples/tiny.jsonl" ||
    { bad "build shards"; exit 1; }
rm -f "$T/shards/rejects.jsonl"
D=$T/shards
base=(--model tiny --seq-len 32 --steps 2 --token-budget 128 --batch-tokens 128 --quiet)
sums() { (cd "$1" && sha256sum manifest.json *.mks); }
sums "$D" >"$T/sums0"
shard=$(ls "$D"/train-*.mks | head -1)

if [ "$PART" = set ]; then
cp -r "$D" "$T/twice"
python3 - "$T/twice/manifest.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
m["shards"].insert(0, dict(m["shards"][0]))
json.dump(m, open(sys.argv[1], "w"), indent=2)
EOF
run 2 "a shard listed twice in the manifest" "$(basename "$shard")" -- "$LLM" --data "$T/twice" "${base[@]}"
mkdir "$T/fifo_set" && mkfifo "$T/fifo_set/manifest.json"
run 2 "FIFO as manifest.json" "manifest.json" -- "$LLM" --data "$T/fifo_set" "${base[@]}"
cp -r "$D" "$T/fifo_shard" && rm "$T/fifo_shard/$(basename "$shard")" && mkfifo "$T/fifo_shard/$(basename "$shard")"
run 2 "FIFO as a shard" "$(basename "$shard")" -- "$LLM" --data "$T/fifo_shard" "${base[@]}" --no-verify
exit $fail
fi

# ---------------------------------------------------------------- checkpoints
"$LLM" --data "$D" "${base[@]}" --ckpt-dir "$T/ck" 2>"$T/err" || { bad "training run: $(cat "$T/err")"; exit 1; }
CK=$T/ck/ckpt.bin
mkdir -p "$T/fifo_ck" && mkfifo "$T/fifo_ck/ckpt.bin"
run 2 "FIFO as ckpt.bin" "not a regular file" -- "$LLM" --data "$D" "${base[@]}" --ckpt-dir "$T/fifo_ck" --resume

cp -r "$T/ck" "$T/ck_app" && printf 'appended' >>"$T/ck_app/ckpt.bin"
run 2 "bytes appended to ckpt.bin" "trailing bytes" -- "$LLM" --data "$D" "${base[@]}" --ckpt-dir "$T/ck_app" --resume
cp -r "$T/ck" "$T/ck_trunc" && truncate -s -1 "$T/ck_trunc/ckpt.bin"
run 2 "truncated ckpt.bin" "truncated" -- "$LLM" --data "$D" "${base[@]}" --ckpt-dir "$T/ck_trunc" --resume
# little-endian u64 patch at an offset (n_sections at 120, the first
# section's size at 160, step at 8)
patch64() { python3 -c 'import struct,sys; f=open(sys.argv[1],"r+b"); f.seek(int(sys.argv[2])); f.write(struct.pack("<Q", int(sys.argv[3])))' "$@"; }
for c in "120 4611686018427387904 n_sections=2^62" "120 0 n_sections=0" "160 18446744073709551615 section size 2^64-1" \
         "160 18446744073709551000 section size that wraps the sum" "8 18446744073709551615 step 2^64-1"; do
    set -- $c
    rm -rf "$T/ck_p" && cp -r "$T/ck" "$T/ck_p" && patch64 "$T/ck_p/ckpt.bin" "$1" "$2"
    run 2 "ckpt.bin with $3" "ckpt.bin" -- "$LLM" --data "$D" "${base[@]}" --ckpt-dir "$T/ck_p" --resume
done
rm -rf "$T/ck_p" && cp -r "$T/ck" "$T/ck_p" && python3 -c 'import struct,sys; f=open(sys.argv[1],"r+b"); f.seek(96); f.write(struct.pack("<i", 7))' "$T/ck_p/ckpt.bin"
run 2 "ckpt.bin of another model shape" "different model" -- "$LLM" --data "$D" "${base[@]}" --ckpt-dir "$T/ck_p" --resume

# ---------------------------------------------------------------- outputs over inputs
run 64 "--log = manifest.json" "refusing to overwrite an input" -- "$LLM" --data "$D" "${base[@]}" --log "$D/manifest.json"
shard=$(ls "$D"/train-*.mks | head -1)
run 64 "--log = a shard" "refusing to overwrite" -- "$LLM" --data "$D" "${base[@]}" --log "$shard"
ln -s "$D/manifest.json" "$T/link.jsonl"
run 64 "--log = a symlink to the manifest" "refusing to overwrite" -- "$LLM" --data "$D" "${base[@]}" --log "$T/link.jsonl"
run 64 "--log = the checkpoint (--resume)" "the checkpoint" -- "$LLM" --data "$D" "${base[@]}" --ckpt-dir "$T/ck" --resume --log "$CK"
run 64 "--log = ckpt.bin of a new --ckpt-dir" "the checkpoint" -- "$LLM" --data "$D" "${base[@]}" --ckpt-dir "$T/cknew" --log "$T/cknew/ckpt.bin"
cp "$T/tok.tiktoken" "$T/tok_copy.tiktoken"
run 64 "--log = the tokenizer" "tokenizer" -- "$LLM" --data "$D" "${base[@]}" --tokenizer "$T/tok.tiktoken" --log "$T/tok.tiktoken"
cmp -s "$T/tok.tiktoken" "$T/tok_copy.tiktoken" && ok "tokenizer unchanged" || bad "tokenizer changed"
# issue 32 item 9: the set's rejects.jsonl (merge reads it) and any new file in
# the set's folder, under any name, are inputs too
echo '{"file": "a.jsonl", "line": 3, "offset": 10, "reason": "json-malformed", "detail": "x", "bytes": 5}' >"$D/rejects.jsonl"
cp "$D/rejects.jsonl" "$T/rejects0"
run 64 "--log = the set's rejects.jsonl" "refusing to overwrite an input" "--log '$D/rejects.jsonl' lies inside the data folder '$D'" -- \
    "$LLM" --data "$D" "${base[@]}" --log "$D/rejects.jsonl"
ln "$D/rejects.jsonl" "$T/rejects_hard.jsonl"
run 64 "--log = a hard link to the set's rejects.jsonl" "is the same file as '$D/rejects.jsonl' of the data folder" -- \
    "$LLM" --data "$D" "${base[@]}" --log "$T/rejects_hard.jsonl"
ln -s "$D/rejects.jsonl" "$T/rejects_sym.jsonl"
run 64 "--log = a symlink to the set's rejects.jsonl" "lies inside the data folder" -- "$LLM" --data "$D" "${base[@]}" --log "$T/rejects_sym.jsonl"
run 64 "--log = a new file in the data folder" "lies inside the data folder" -- "$LLM" --data "$D" "${base[@]}" --log "$D/train.log"
mkdir "$T/ckh" && ln "$shard" "$T/ckh/ckpt.bin"
run 64 "ckpt.bin of --ckpt-dir = a hard link to a shard" "--ckpt-dir '$T/ckh/ckpt.bin' is the same file as" -- \
    "$LLM" --data "$D" "${base[@]}" --ckpt-dir "$T/ckh"
cmp -s "$T/rejects0" "$D/rejects.jsonl" && [ ! -e "$D/train.log" ] && ok "rejects.jsonl unchanged, no log in the data folder" ||
    bad "the data folder was written"
rm -rf "$D/rejects.jsonl" "$T/rejects_hard.jsonl" "$T/rejects_sym.jsonl" "$T/ckh"
run 64 "--ckpt-dir = the data folder" "data folder" -- "$LLM" --data "$D" "${base[@]}" --ckpt-dir "$D"
run 64 "--ckpt-dir inside the data folder" "data folder" -- "$LLM" --data "$D" "${base[@]}" --ckpt-dir "$D/ck"
[ ! -e "$D/ckpt.bin" ] && [ ! -e "$D/ck" ] && ok "nothing written into the data folder" || bad "data folder written"
sums "$D" >"$T/sums1"
cmp -s "$T/sums0" "$T/sums1" && ok "manifest and shards unchanged (sha256)" || bad "inputs changed: $(diff "$T/sums0" "$T/sums1")"
# a FIFO as --log with no reader: fails instead of blocking
mkfifo "$T/log.fifo"
run 2 "--log FIFO without a reader" "cannot write log" -- "$LLM" --data "$D" "${base[@]}" --log "$T/log.fifo"

# ---------------------------------------------------------------- numeric options
# each: OPTION VALUE... (every value must be refused with exit 64 naming both)
while read -r opt vals; do
    for v in $vals; do
        [ "$v" = "''" ] && v=""
        run 64 "$opt '$v'" "$opt" "'$v'" -- "$LLM" --data "$D" "${base[@]}" "$opt" "$v"
    done
done <<'EOF'
--lr nan inf -inf -1 0 1e999 1e-999 11 0x1p-3x 1e-3x ''
--lr-min nan -1 1e999 x
--steps 0 -1 99999999999999999999 18446744073709551615 1000000001 1e3 5x +5 '' 0x10
--seq-len 0 -1 1048577 4294967328 32x
--token-budget 0 -1 99999999999999999999 1099511627777 1e9
--batch-tokens 0 -128 18446744073709551616 12.5
--warmup -1 99999999999999999999 2x
--weight-decay nan inf -0.5 11
--grad-clip nan inf -1 1e999
--seed -1 18446744073709551616 1.5
--nbuf 0 1 65 -2
--val-rows -1 16777217
--val-every -1 1000000001
--ckpt-every -1 x
--stop-after -5 99999999999999999999
--log-every 0 -1
--recompute 3 -1
--mem-budget nan inf -1 1e3 0x10 99999999999999999999 16777216T 1.5.G ''
EOF
run 64 "--sample=-1" "--sample" -- "$LLM" --data "$D" "${base[@]}" --sample=-1
run 64 "--warmup longer than --steps" "--warmup" -- "$LLM" --data "$D" "${base[@]}" --warmup 5
run 64 "--lr-min above --lr" "--lr-min" -- "$LLM" --data "$D" "${base[@]}" --lr 1e-3 --lr-min 1e-2
run 64 "mkshards plan --seq-len 0" "--seq-len" -- "$MKS" plan --model tiny --seq-len 0 --token-budget 64
run 64 "mkshards plan --mem-budget nan" "--mem-budget" -- "$MKS" plan --model tiny --seq-len 16 --mem-budget nan
run 64 "mkshards plan --token-budget 99999999999999999999" "--token-budget" -- "$MKS" plan --model tiny --seq-len 16 --token-budget 99999999999999999999
run 0 "plan still takes 1.5GiB" -- "$MKS" plan --model tiny --seq-len 16 --token-budget 64 --vocab-size 512 --mem-budget 1.5GiB

# ---------------------------------------------------------------- vocabulary
nrows=$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); print([s["rows"] for s in m["shards"] if s["split"]=="train"][0])' "$D/manifest.json")
first=$("$GEN" firstrow "$nrows" 1337) || bad "firstrow"
cp -r "$D" "$T/badid"
"$GEN" badid "$T/badid" "$(basename "$shard")" "$first" 5 600 || bad "craft badid"
run 2 "id 600 >= vocab 512 in train row $first" "$(basename "$shard") row $first" "outside the vocabulary" -- \
    "$LLM" --data "$T/badid" "${base[@]}"
run 2 "the same without hashing the files (--no-verify)" "row $first" -- "$LLM" --data "$T/badid" "${base[@]}" --no-verify
cp -r "$D" "$T/badval"
vshard=$(ls "$D"/val-*.mks | head -1)
"$GEN" badid "$T/badval" "$(basename "$vshard")" 0 0 65535 || bad "craft badval"
run 2 "id 65535 in val row 0" "$(basename "$vshard") row 0" "outside the vocabulary" -- \
    "$LLM" --data "$T/badval" "${base[@]}" --val-every 1
cp -r "$D" "$T/bigvocab"
"$GEN" vocab "$T/bigvocab" "$(basename "$shard")" 1024 || bad "craft vocab"
run 2 "shard header vocabulary 1024 > the model's 512" "$(basename "$shard")" -- "$LLM" --data "$T/bigvocab" "${base[@]}"

exit $fail
