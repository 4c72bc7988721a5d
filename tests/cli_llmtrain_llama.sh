#!/usr/bin/env bash
# cli_llmtrain_llama.sh MKSHARDS SHARED_DIR DATA_DIR - the Llama family as a
# model of llmtrain (issue 30, train/family.h) on the CPU backend:
#   --model llama-tiny and --model config.json train; --plan for a Llama
#   model (mkshards plan = llmtrain --plan); bit-exact resume (checkpoint +
#   model.txt); gradient accumulation (2 micro-batches = 1 of twice the rows,
#   to float rounding); --doc-mask reaches the model; a checkpoint of one
#   family refused by a run of another; --device cuda refused with a message.
set -u
MKS=$1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LLM=${LLMTRAIN:-$(dirname "$MKS")/llmtrain/llmtrain}
[ -x "$LLM" ] || { echo "skip: no llmtrain at $LLM"; exit 77; }
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$ROOT/tests/cli_check.sh"

"$MKS" tokenizer train --vocab-size 512 --out "$T/tok.tiktoken" -s '<|endoftext|>' -q "$ROOT/samples/tiny.jsonl" 2>/dev/null ||
    { bad "tokenizer train"; exit 1; }
"$MKS" build -t "$T/tok.tiktoken" -L 33 -o "$T/shards" --val-fraction 0.05 -q "$ROOT/samples/tiny.jsonl" ||
    { bad "build shards"; exit 1; }
losses() { grep -o '"loss":[^,]*' "$1" | cut -d: -f2; }

# ---- plan
"$MKS" plan --data "$T/shards" --model llama-tiny --seq-len 32 --token-budget 64 >"$T/p1" 2>&1
"$LLM" --plan --data "$T/shards" --model llama-tiny --seq-len 32 --token-budget 64 >"$T/p2" 2>&1
cmp -s "$T/p1" "$T/p2" && grep -q "activations (forward, kept for backward)" "$T/p1" &&
    ok "llama plan: mkshards plan = llmtrain --plan, the family's rows" || bad "llama plan: $(head -c 600 "$T/p1")"
run 64 "unknown --model names every family's presets" "llama-tiny" "smollm-135m" "d12" "config.json" -- \
    "$LLM" --data "$T/shards" --model nosuch --seq-len 32 --steps 1

# ---- bit-exact resume
common=(--data "$T/shards" --model llama-tiny --seq-len 32 --steps 6 --token-budget 64 --batch-tokens 128 --seed 7
    --val-every 3 --quiet)
"$LLM" "${common[@]}" --log "$T/a.jsonl" --ckpt-dir "$T/ca" 2>"$T/err"; expect_rc 0 $? "llama: uninterrupted run"
"$LLM" "${common[@]}" --log "$T/b.jsonl" --ckpt-dir "$T/cb" --ckpt-every 2 --stop-after 3 2>"$T/err"
expect_rc 0 $? "llama: run stopped at step 3"
[ -f "$T/cb/model.txt" ] && grep -q "^family 1" "$T/cb/model.txt" && ok "checkpoint records the family (model.txt)" ||
    bad "no model.txt in the checkpoint"
"$LLM" "${common[@]}" --log "$T/b.jsonl" --ckpt-dir "$T/cb" --ckpt-every 2 --resume 2>"$T/err"
expect_rc 0 $? "llama: resumed run"
if [ "$(losses "$T/a.jsonl")" = "$(losses "$T/b.jsonl")" ] && [ "$(grep -c '"loss"' "$T/a.jsonl")" = 6 ] &&
   [ "$(grep -o '"val_loss":[^,]*' "$T/a.jsonl")" = "$(grep -o '"val_loss":[^,]*' "$T/b.jsonl")" ]; then
    ok "llama resume: losses and val losses bit-identical"
else bad "llama resume losses differ"; paste <(losses "$T/a.jsonl") <(losses "$T/b.jsonl"); fi
cmp -s "$T/ca/ckpt.bin" "$T/cb/ckpt.bin" && ok "llama resume: final checkpoints byte-identical" ||
    bad "llama resume: final checkpoints differ"
# another family on this checkpoint, or another Llama shape, is refused
# (a GPT-2 checkpoint and a Llama config.json of the same header shape: 2 layers, 2 heads, 64 wide)
"$LLM" --data "$T/shards" --model tiny --seq-len 32 --steps 1 --ckpt-dir "$T/cg" --quiet 2>"$T/err"
expect_rc 0 $? "a GPT-2 checkpoint"
cat >"$T/same.json" <<'JSON'
{"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
 "num_attention_heads": 2, "vocab_size": 512, "max_position_embeddings": 64, "rms_norm_eps": 1e-5}
JSON
run 2 "Llama run on a GPT-2 checkpoint of the same shape refused" "gpt2 family; this run: llama" -- \
    "$LLM" --data "$T/shards" --model "$T/same.json" --seq-len 32 --steps 4 --ckpt-dir "$T/cg" --resume
cp "$T/cb/model.txt" "$T/cg/model.txt"
run 2 "GPT-2 run on a checkpoint recording the Llama family refused" "llama family; this run: gpt2" -- \
    "$LLM" --data "$T/shards" --model tiny --seq-len 32 --steps 4 --ckpt-dir "$T/cg" --resume
sed 's/^rope_theta .*/rope_theta 0x1.388p+12/' "$T/cb/model.txt" >"$T/m" && cp "$T/m" "$T/cb/model.txt"
run 2 "Llama checkpoint of another rope_theta refused" "another configuration" -- \
    "$LLM" "${common[@]}" --steps 8 --ckpt-dir "$T/cb" --resume

# ---- gradient accumulation: 2 micro-batches of 2 rows = 1 micro-batch of 4 rows (float rounding apart)
acc=(--data "$T/shards" --model llama-tiny --seq-len 32 --steps 3 --batch-tokens 128 --seed 3 --quiet)
"$LLM" "${acc[@]}" --token-budget 64 --log "$T/m2.jsonl" 2>"$T/err"; expect_rc 0 $? "llama: 2 micro-batches a step"
"$LLM" "${acc[@]}" --token-budget 128 --log "$T/m1.jsonl" 2>"$T/err"; expect_rc 0 $? "llama: 1 micro-batch a step"
grep -q '"micro_batches":2' "$T/m2.jsonl" && grep -q '"micro_batches":1' "$T/m1.jsonl" &&
    paste <(losses "$T/m2.jsonl") <(losses "$T/m1.jsonl") |
    awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * $2) bad = 1; n++ } END { exit !(n == 3 && !bad) }' &&
    ok "llama accumulation: step losses agree to 1e-5 ($(losses "$T/m2.jsonl" | tr '\n' ' '))" ||
    { bad "llama accumulation"; paste <(losses "$T/m2.jsonl") <(losses "$T/m1.jsonl"); }

# ---- --doc-mask: rows holding several documents give another first-step loss
for i in $(seq 300); do echo "{\"text\": \"Elsa counted $i coins near the door.\"}"; done >"$T/short.jsonl"
"$MKS" build -t "$T/tok.tiktoken" -L 33 -o "$T/short" -q "$T/short.jsonl" || bad "build short-document shards"
dm=(--data "$T/short" --model llama-tiny --seq-len 32 --steps 1 --token-budget 128 --seed 5 --quiet)
"$LLM" "${dm[@]}" --log "$T/d0.jsonl" 2>"$T/err"; expect_rc 0 $? "llama: without --doc-mask"
"$LLM" "${dm[@]}" --doc-mask --log "$T/d1.jsonl" 2>"$T/err"; expect_rc 0 $? "llama: --doc-mask"
[ -n "$(losses "$T/d1.jsonl")" ] && [ "$(losses "$T/d0.jsonl")" != "$(losses "$T/d1.jsonl")" ] &&
    ok "llama --doc-mask changes the loss ($(losses "$T/d0.jsonl") -> $(losses "$T/d1.jsonl"))" ||
    bad "llama --doc-mask: same loss $(losses "$T/d0.jsonl")"

# ---- --model config.json (transformers' LlamaForCausalLM config)
cat >"$T/config.json" <<'JSON'
{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
 "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": false,
 "hidden_act": "silu"}
JSON
"$LLM" --data "$T/shards" --model "$T/config.json" --seq-len 32 --steps 2 --token-budget 64 --log "$T/c.jsonl" \
    >"$T/out" 2>"$T/err"
expect_rc 0 $? "llama: --model config.json"
# 512*32 embedding + lm_head, 2 layers of q,o 32x32, k,v 16x32, gate/up/down 64x32, 2 norms; final norm
want=$((2 * 512 * 32 + 2 * (2 * 32 * 32 + 2 * 16 * 32 + 3 * 64 * 32 + 2 * 32) + 32))
grep -q "($want params)" "$T/out" && [ "$(grep -c '"loss"' "$T/c.jsonl")" = 2 ] &&
    ok "config.json model: $want params (untied lm_head)" || bad "config.json model: $(head -2 "$T/out")"
sed 's/"max_position_embeddings": 64/"max_position_embeddings": 16/' "$T/config.json" >"$T/short.json"
run 64 "config.json shorter than --seq-len refused" "max_position_embeddings 16" -- \
    "$LLM" --data "$T/shards" --model "$T/short.json" --seq-len 32 --steps 1
sed 's/"llama"/"gemma"/' "$T/config.json" >"$T/g.json"
run 2 "config.json of another model_type refused" "model_type" -- \
    "$LLM" --data "$T/shards" --model "$T/g.json" --seq-len 32 --steps 1

# ---- CUDA: refused with a message, never a crash (without a CUDA build: no backend; with one: the family)
run 2 "--device cuda with a Llama model refused" "cuda" -- \
    "$LLM" --data "$T/shards" --model llama-tiny --seq-len 32 --steps 1 --device cuda
# ---- export and --init-from: transformers' losses on the same rows (tests/data/hf/export_llama.json,
# made by tests/hf/make_llama_export_fixture.py from this very run) equal llmtrain's to 1e-4
"$LLM" --data "$T/shards" --model llama-tiny --seq-len 32 --steps 3 --token-budget 256 --batch-tokens 256 \
    --val-every 3 --val-rows 8 --ckpt-dir "$T/ck" --log "$T/x.jsonl" --quiet 2>"$T/err"
expect_rc 0 $? "llama: the export fixture's run"
run 0 "llmtrain export of a Llama checkpoint" -- \
    "$LLM" export --ckpt "$T/ck" --out "$T/hf" --data "$T/shards" --tokenizer "$T/tok.tiktoken"
grep -q '"LlamaForCausalLM"' "$T/hf/config.json" && [ -f "$T/hf/generation_config.json" ] &&
    [ -f "$T/hf/tokenizer.json" ] && [ -f "$T/hf/tokenizer_config.json" ] && [ -f "$T/hf/model.safetensors" ] &&
    ok "export: LlamaForCausalLM config, generation_config, tokenizer, safetensors" || bad "export files: $(ls "$T/hf")"
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 1e-4 * b) }'; }
fx="$ROOT/tests/data/hf/export_llama.json"
ours=$(tail -1 "$T/x.jsonl" | sed -n 's/.*"val_loss":\([^,}]*\).*/\1/p')
hf=$(sed -n 's/.*"hf_run_val_loss": *\([^,}]*\).*/\1/p' "$fx")
close "$ours" "$hf" && ok "the run's validation loss $ours equals transformers' $hf on the export" ||
    bad "validation loss '$ours' vs transformers' '$hf'"
"$LLM" --data "$T/shards" --init-from "$T/hf" --seq-len 32 --steps 1 --token-budget 256 --batch-tokens 256 \
    --log "$T/i.jsonl" --quiet 2>"$T/err"
expect_rc 0 $? "llama: --init-from the export"
ours=$(head -1 "$T/i.jsonl" | sed -n 's/.*"loss":\([^,}]*\).*/\1/p')
hf=$(sed -n 's/.*"hf_init_first_loss": *\([^,}]*\).*/\1/p' "$fx")
close "$ours" "$hf" && ok "--init-from: first step loss $ours equals transformers' $hf" ||
    bad "--init-from first loss '$ours' vs transformers' '$hf'"
"$MKS" tokenizer train --vocab-size 400 --out "$T/tok2.tiktoken" -s '<|endoftext|>' -q "$ROOT/samples/tiny.jsonl" 2>/dev/null
"$MKS" build -t "$T/tok2.tiktoken" -L 33 -o "$T/shards2" -q "$ROOT/samples/tiny.jsonl"
run 2 "--init-from a Llama folder of another tokenizer refused" "tokenizer" -- \
    "$LLM" --data "$T/shards2" --init-from "$T/hf" --seq-len 32 --steps 1
# the GPU plan of a Llama model: its GPU model's own rows (train/gpu_llama_plan.c through the family)
"$LLM" --plan --data "$T/shards" --model llama-tiny --seq-len 32 --device cuda --mem-budget 1G >"$T/gplan" 2>"$T/err"
rc=$?
[ $rc = 0 ] && grep -q "rotary cos/sin table" "$T/gplan" && grep -q "device input batch" "$T/gplan" &&
    ok "--plan --device cuda for a Llama model: the GPU Llama model's rows and the run's" ||
    bad "--plan --device cuda for a Llama model: exit $rc: $(head -c 300 "$T/err")"
run 64 "--plan --device cuda --recompute 1 for a Llama model refused" "recompute 0" -- \
    "$LLM" --plan --data "$T/shards" --model llama-tiny --seq-len 32 --device cuda --mem-budget 1G --recompute 1
exit $fail
