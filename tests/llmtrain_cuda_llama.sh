#!/usr/bin/env bash
# llmtrain_cuda_llama.sh LLMTRAIN DATA - the Llama family trained by the CUDA
# backend (issue 30 item 3: train/gpu_llama.cu behind the family's GPU model
# ops) against the CPU reference backend, end to end through llmtrain.
# Exit 77 (skipped) without a usable GPU or a CUDA build.
#   - llama-tiny (GQA 4/2, heads of 16), fp32, 2 micro-batches a step
#     (accumulation), --doc-mask: every step's loss and gradient norm and the
#     validation loss within 2e-4 relative of --device cpu;
#   - a Qwen2-shaped config.json (q/k/v biases, untied head, heads of 64,
#     multi-query), fp32: the same bound;
#   - bf16: finite, loss within 3e-2 relative of the CPU's;
#   - checkpoint/resume on the GPU (the Qwen2 config: device and host tensor
#     orders differ): stopped after 2 steps and resumed == the uninterrupted
#     run, bit for bit (log values and ckpt.bin);
#   - --recompute 1 is refused naming level 0 (exit 64).
set -u
LLM=$1
DATA=$2
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
A=(--data "$DATA" --steps 6 --seed 5 --lr 3e-3 --warmup 2 --no-verify --seq-len 32 --batch-tokens 256
   --token-budget 128 --val-every 3 --val-rows 8 --doc-mask --quiet)
"$LLM" "${A[@]}" --model llama-tiny --steps 1 --warmup 0 --device cuda --log "$T/probe.jsonl" > "$T/probe.out" 2>&1
rc=$?
if [ $rc != 0 ] && grep -qE "no usable CUDA GPU|no CUDA backend|sees no CUDA GPU" "$T/probe.out"; then
    echo "skipped: $(head -1 "$T/probe.out")"
    exit 77
fi
[ $rc = 0 ] || bad "llama-tiny --device cuda: exit $rc: $(tail -3 "$T/probe.out")"

# cmp_logs a b tol: per-step loss, grad_norm and val_loss within tol relative (0: identical)
cmp_logs() { python3 "$(dirname "$0")/train_log_cmp.py" "$T/$1.jsonl" "$T/$2.jsonl" "$3" loss grad_norm val_loss; }
run() { # name args...
    local n=$1; shift
    "$LLM" "${A[@]}" --log "$T/$n.jsonl" --ckpt-dir "$T/c_$n" "$@" > "$T/$n.out" 2>&1 || bad "run $n: $(tail -3 "$T/$n.out")"
}

run cpu --model llama-tiny --device cpu
run gpu --model llama-tiny --device cuda --precision fp32
m=$(cmp_logs cpu gpu 2e-4) && ok "llama-tiny fp32, doc mask, 2 micro-batches: CUDA == CPU ($m)" || bad "llama-tiny CUDA vs CPU: $m"

cat > "$T/qwen2.json" <<'EOF'
{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 128, "intermediate_size": 256,
 "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 1024,
 "max_position_embeddings": 64, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": false,
 "use_sliding_window": false, "hidden_act": "silu"}
EOF
run qcpu --model "$T/qwen2.json" --device cpu
run qgpu --model "$T/qwen2.json" --device cuda --precision fp32
m=$(cmp_logs qcpu qgpu 2e-4) && ok "Qwen2 config.json (biases, untied, heads of 64, 1 KV head) fp32: CUDA == CPU ($m)" ||
    bad "Qwen2 CUDA vs CPU: $m"

run bgpu --model llama-tiny --device cuda --precision bf16
m=$(cmp_logs cpu bgpu 3e-2) && ok "llama-tiny bf16 on CUDA within 3e-2 of the CPU's fp32 ($m)" || bad "llama-tiny bf16: $m"

# resume with the Qwen2 config: its q/k/v biases put the device's tensor order apart from the host's, so the
# checkpoint's parameters and AdamW moments go through the per-tensor permutation both ways
run full --model "$T/qwen2.json" --device cuda --precision bf16 --steps 4
run res --model "$T/qwen2.json" --device cuda --precision bf16 --steps 4 --stop-after 2
"$LLM" "${A[@]}" --log "$T/res.jsonl" --ckpt-dir "$T/c_res" --model "$T/qwen2.json" --device cuda --precision bf16 \
    --steps 4 --resume > "$T/res2.out" 2>&1 || bad "resume: $(tail -3 "$T/res2.out")"
m=$(cmp_logs full res 0) && cmp -s "$T/c_full/ckpt.bin" "$T/c_res/ckpt.bin" &&
    ok "Qwen2 config bf16 on CUDA: stopped at 2 + resumed == uninterrupted, bit for bit ($m; ckpt.bin identical)" ||
    bad "CUDA resume: $m"

"$LLM" "${A[@]}" --model llama-tiny --device cuda --recompute 1 > "$T/rc.out" 2>&1
rc=$?
[ $rc = 64 ] && grep -q "recompute 0" "$T/rc.out" && ok "--recompute 1 refused for the GPU Llama model (exit 64)" ||
    bad "--recompute 1: exit $rc: $(tail -2 "$T/rc.out")"
exit $fail
