#!/usr/bin/env bash
# cli_export.sh MKSHARDS SHARED_DIR DATA_DIR - `llmtrain export` end to end
# (issue 30): a short run's checkpoint exported as a Hugging Face folder
# (fp32 and bf16: files, config, tokenizer with the shards' EOS), and its
# refusals: usage (64), an output inside the data or over the checkpoint
# (64), the wrong tokenizer (2, naming both fingerprints), a corrupt
# checkpoint (2); `llmtrain --init-from` the export (first step's loss =
# transformers' figure) and its refusals (another tokenizer's shards, hostile
# safetensors: exit 2; --plan: 64); --export / --export-every (the same
# bytes as `llmtrain export`; outputs over inputs: 64). Layout parity:
# test_hf_export.
set -u
MKS=$1
SHARED=$2
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LLM=${LLMTRAIN:-$(dirname "$MKS")/llmtrain/llmtrain}
[ -x "$LLM" ] || { echo "skip: no llmtrain at $LLM"; exit 77; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$ROOT/tests/cli_check.sh"

"$MKS" tokenizer train --vocab-size 300 --out "$T/tok.tiktoken" -s '<|endoftext|>' -q "$ROOT/samples/tiny.jsonl" ||
    { bad "train tokenizer"; exit 1; }
"$MKS" build -t "$T/tok.tiktoken" -L 33 -o "$T/shards" --val-fraction 0.05 -q "$ROOT/samples/tiny.jsonl" ||
    { bad "build shards"; exit 1; }
"$LLM" --data "$T/shards" --model tiny --seq-len 32 --steps 3 --token-budget 256 --batch-tokens 256 \
    --val-every 3 --val-rows 8 --ckpt-dir "$T/ck" --log "$T/log.jsonl" --quiet > /dev/null 2>&1 ||
    { bad "train"; exit 1; }
# this run is tests/hf/make_export_fixture.py's: transformers' loss on its 8
# validation rows, from the fp32 export, is committed; llmtrain's must equal
# it to 1e-4 relative
ours=$(tail -1 "$T/log.jsonl" | sed -n 's/.*"val_loss":\([^,}]*\).*/\1/p')
hf=$(sed -n 's/.*"hf_run_val_loss": *\([^,}]*\).*/\1/p' "$ROOT/tests/data/hf/export_gpt2.json")
if [ -n "$ours" ] && [ -n "$hf" ] && awk -v a="$ours" -v b="$hf" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * b) }'; then
    ok "the run's validation loss $ours equals transformers' $hf on the export (1e-4 relative)"
else
    bad "the run's validation loss '$ours' differs from transformers' '$hf' on the export"
fi

run 0 "export fp32" -- "$LLM" export --ckpt "$T/ck" --out "$T/hf" --data "$T/shards" --tokenizer "$T/tok.tiktoken"
for f in model.safetensors config.json generation_config.json tokenizer.json tokenizer_config.json; do
    [ -s "$T/hf/$f" ] && ok "export wrote $f" || bad "export did not write $f"
done
grep -q '"GPT2LMHeadModel"' "$T/hf/config.json" && grep -q '"vocab_size": 300' "$T/hf/config.json" &&
    grep -q '"float32"' "$T/hf/config.json" && ok "config.json: GPT2LMHeadModel, unpadded vocab 300, float32" ||
    bad "config.json: $(head -c 300 "$T/hf/config.json")"
grep -q '"eos_token": "<|endoftext|>"' "$T/hf/tokenizer_config.json" && ok "tokenizer_config.json: the shards' EOS" ||
    bad "tokenizer_config.json: $(cat "$T/hf/tokenizer_config.json")"
run 0 "export bf16" -- "$LLM" export --ckpt "$T/ck" --out "$T/hf16" --dtype bf16 --tokenizer "$T/tok.tiktoken"
s32=$(stat -c %s "$T/hf/model.safetensors"); s16=$(stat -c %s "$T/hf16/model.safetensors")
[ "$s16" -lt "$s32" ] && grep -q '"bfloat16"' "$T/hf16/config.json" && ok "bf16: $s16 bytes < fp32 $s32" ||
    bad "bf16 export: $s16 bytes vs $s32"
run 0 "export --help" -- "$LLM" export --help
run 64 "export without --out" "--ckpt DIR and --out" -- "$LLM" export --ckpt "$T/ck"
run 64 "export --dtype fp8" "--dtype takes fp32 or bf16" -- "$LLM" export --ckpt "$T/ck" --out "$T/x" --dtype fp8
run 64 "export unknown option" "unknown" -- "$LLM" export --ckpt "$T/ck" --out "$T/x" --frobnicate
run 64 "export --out inside the data" "--out" -- "$LLM" export --ckpt "$T/ck" --out "$T/shards/hf" --data "$T/shards"
run 2 "export of a missing checkpoint" "cannot open checkpoint" -- "$LLM" export --ckpt "$T/nothing" --out "$T/x"
if [ -r "$SHARED/vocab/gpt2.tiktoken" ]; then
    run 2 "export with another tokenizer" "fingerprint" "is not the one the checkpoint" -- \
        "$LLM" export --ckpt "$T/ck" --out "$T/x" --tokenizer "$SHARED/vocab/gpt2.tiktoken"
else
    bad "no $SHARED/vocab/gpt2.tiktoken"
fi
# --init-from the export: config.json defines the model, the exported
# tokenizer.json is the shards' (llmtrain's record), the first step's loss is
# transformers' on that step's rows (committed, tests/hf/make_export_fixture.py)
"$LLM" --data "$T/shards" --init-from "$T/hf" --seq-len 32 --steps 1 --token-budget 256 --batch-tokens 256 \
    --log "$T/init.jsonl" --quiet > /dev/null 2> "$T/err"
expect_rc 0 $? "--init-from the export"
ours=$(head -1 "$T/init.jsonl" | sed -n 's/.*"loss":\([^,}]*\).*/\1/p')
hf=$(sed -n 's/.*"hf_init_first_loss": *\([^,}]*\).*/\1/p' "$ROOT/tests/data/hf/export_gpt2.json")
if [ -n "$ours" ] && [ -n "$hf" ] && awk -v a="$ours" -v b="$hf" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-4 * b) }'; then
    ok "--init-from: first step loss $ours equals transformers' $hf (1e-4 relative)"
else
    bad "--init-from: first step loss '$ours' differs from transformers' '$hf'"
fi
# shards of another tokenizer (same vocabulary size, trained on other text)
"$MKS" tokenizer train --vocab-size 300 --out "$T/tok2.tiktoken" -s '<|endoftext|>' -q "$ROOT/samples/notes.txt" &&
    "$MKS" build -t "$T/tok2.tiktoken" -L 33 -o "$T/shards2" --val-fraction 0.05 -q "$ROOT/samples/tiny.jsonl" ||
    bad "build the other shards"
run 2 "--init-from with shards of another tokenizer" "fingerprint" "is not the one" -- \
    "$LLM" --data "$T/shards2" --init-from "$T/hf" --seq-len 32 --steps 1 --token-budget 256 --batch-tokens 256
run 64 "--plan --init-from" "--plan does not read --init-from" -- \
    "$LLM" --plan --data "$T/shards" --init-from "$T/hf" --seq-len 32 --token-budget 256
# hostile safetensors, crafted here: a 1 GB header size word, a truncated file
cp -r "$T/hf" "$T/hfbig"
printf '\x00\xca\x9a\x3b\x00\x00\x00\x00' | dd of="$T/hfbig/model.safetensors" bs=1 conv=notrunc 2> /dev/null
run 2 "--init-from: a 1 GB safetensors header" "over the 100,000,000-byte limit" -- \
    "$LLM" --data "$T/shards" --init-from "$T/hfbig" --seq-len 32 --steps 1 --token-budget 256 --batch-tokens 256
cp -r "$T/hf" "$T/hfcut"
truncate -s -4 "$T/hfcut/model.safetensors"
run 2 "--init-from: a truncated model.safetensors" "byte buffer holds" -- \
    "$LLM" --data "$T/shards" --init-from "$T/hfcut" --seq-len 32 --steps 1 --token-budget 256 --batch-tokens 256
# --export / --export-every: the run writes the same folder as `llmtrain
# export` of its final checkpoint, byte for byte
"$LLM" --data "$T/shards" --model tiny --seq-len 32 --steps 3 --token-budget 256 --batch-tokens 256 \
    --ckpt-dir "$T/ck3" --export "$T/hfrun" --export-every 2 --tokenizer "$T/tok.tiktoken" > "$T/out3" 2> "$T/err"
expect_rc 0 $? "a run with --export-every 2"
grep -q "exported step 2 to" "$T/out3" && grep -q "exported step 3 to" "$T/out3" && ok "exported at steps 2 and 3" ||
    bad "--export-every 2: $(grep exported "$T/out3")"
"$LLM" export --ckpt "$T/ck3" --out "$T/hfck3" --data "$T/shards" --tokenizer "$T/tok.tiktoken" > /dev/null 2>&1
same=1
for f in model.safetensors config.json generation_config.json tokenizer.json tokenizer_config.json; do
    cmp -s "$T/hfrun/$f" "$T/hfck3/$f" || { same=0; bad "--export's $f differs from llmtrain export's"; }
done
[ $same = 1 ] && ok "--export at the end = llmtrain export of the final checkpoint (5 files byte for byte)"
run 64 "--export inside the data" "--export" "inside the data folder" -- \
    "$LLM" --data "$T/shards" --model tiny --seq-len 32 --steps 1 --export "$T/shards/hf"
run 64 "--export into the --init-from folder" "--export" "lies inside the input folder" -- \
    "$LLM" --data "$T/shards" --init-from "$T/hf" --seq-len 32 --steps 1 --export "$T/hf/again"
run 64 "--export-every without --export" "--export-every needs --export" -- \
    "$LLM" --data "$T/shards" --steps 1 --export-every 2
cp -r "$T/ck" "$T/ckbad"
printf 'XXXX' | dd of="$T/ckbad/ckpt.bin" bs=1 seek=300 conv=notrunc 2> /dev/null
run 2 "export of a corrupt checkpoint" "checksum" -- "$LLM" export --ckpt "$T/ckbad" --out "$T/x"
[ ! -e "$T/x/model.safetensors" ] && ok "nothing exported from the refused runs" || bad "a refused export wrote files"
exit $fail
