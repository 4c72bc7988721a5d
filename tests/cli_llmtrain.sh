#!/usr/bin/env bash
# cli_llmtrain.sh MKSHARDS SHARED_DIR DATA_DIR - llmtrain / mkshards plan
# acceptance checks on real shards built from samples/:
#   plan exit codes (0 fits, 3 refused with reasons), JSON plan, --device cuda
#   without a backend (exit 2), JSONL log fields, token budget never exceeded
#   over random shard sets, bit-exact resume, corrupt shard and wrong
#   tokenizer refused with a clear message (exit 2).
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

# ---- plan
# mkshards (plan included) links none of the trainer's runtimes: in a CUDA build cudart +
# cuBLASLt + NCCL cost ~50 ms of start-up in every mkshards command (measured 56 ms for an
# empty `encode`, against ~2 ms), libmpi ~2 ms
# (nor OpenMP's, ~0.15 ms: the planner's thread count comes from tr_threads_default there)
# (the binary's own NEEDED entries, read by readelf: ldd gave no answer in CI once, which
# would pass this check without looking; a static build has none, so there the runtimes'
# entry points must be absent from the binary itself)
heavy=$(readelf -d "$MKS" 2>/dev/null | grep NEEDED | grep -oE 'lib(cudart|cublas|cublasLt|nccl|mpi|gomp)[^] ]*' |
    sort -u | tr '\n' ' ')
for sym in cudaMalloc cublasLtMatmul ncclAllReduce MPI_Init GOMP_parallel; do
    grep -qa "$sym" "$MKS" && heavy="$heavy$sym "
done
[ -z "$heavy" ] && ok "mkshards links no trainer runtime" || bad "mkshards links $heavy(start-up of every command)"
# the same plan from both programs, per-thread lines included (llmtrain asks OpenMP's runtime)
for th in 3 ""; do
    (
        if [ -n "$th" ]; then export OMP_NUM_THREADS=$th; else unset OMP_NUM_THREADS; fi
        "$MKS" plan --data "$T/shards" --model tiny --seq-len 32 --token-budget 256 >"$T/p1" 2>&1
        "$LLM" --plan --data "$T/shards" --model tiny --seq-len 32 --token-budget 256 >"$T/p2" 2>&1
        cmp -s "$T/p1" "$T/p2"
    ) && grep -q "per thread" "$T/p1" && ok "mkshards plan = llmtrain --plan (OMP_NUM_THREADS '${th:-unset}')" ||
        bad "mkshards plan differs from llmtrain --plan (OMP_NUM_THREADS '${th:-unset}'): $(diff "$T/p1" "$T/p2" | head -4)"
done
# OMP_NUM_THREADS above TR_MAX_THREADS (4096): libgomp segfaulted starting a team of 100000 at
# the first parallel region (issue 32); now both programs warn and plan the CPUs (OMP_NUM_THREADS unset)
(unset OMP_NUM_THREADS; "$MKS" plan --data "$T/shards" --model tiny --seq-len 32 --token-budget 256 >"$T/p0" 2>&1)
for th in 100000 99999999999 4097,2; do
    OMP_NUM_THREADS=$th "$MKS" plan --data "$T/shards" --model tiny --seq-len 32 --token-budget 256 >"$T/p1" 2>"$T/e1"
    OMP_NUM_THREADS=$th "$LLM" --plan --data "$T/shards" --model tiny --seq-len 32 --token-budget 256 >"$T/p2" 2>"$T/e2"
    cmp -s "$T/p0" "$T/p1" && cmp -s "$T/p1" "$T/p2" && grep -q "OMP_NUM_THREADS=${th%%,*} is above 4096 threads" "$T/e1" "$T/e2" &&
        [ "$(grep -c 'above 4096' "$T/e1" "$T/e2" | grep -c ':1')" = 2 ] && grep -q "per thread" "$T/p1" &&
        ok "plan with OMP_NUM_THREADS=$th: the same plan, a warning" || bad "plan with OMP_NUM_THREADS=$th: $(cat "$T/e1" "$T/e2")"
done
OMP_NUM_THREADS=100000 timeout 120 "$LLM" --data "$T/shards" --model tiny --seq-len 32 --steps 2 --token-budget 256 \
    --quiet >"$T/out" 2>"$T/err"
expect_rc 0 $? "train with OMP_NUM_THREADS=100000"
grep -q "OMP_NUM_THREADS=100000 is above 4096 threads: using" "$T/err" && ok "clamp named: $(head -c 120 "$T/err")" ||
    bad "no warning: $(head -c 300 "$T/err")"
# --sample prints model text escaped (tk_escape_text): an almost untrained model on a 512-token
# vocabulary samples single bytes (C0 controls, lone UTF-8 bytes) that reached the terminal raw
"$LLM" --data "$T/shards" --model tiny --seq-len 32 --steps 1 --token-budget 256 --quiet --sample 300 \
    --tokenizer "$T/tok.tiktoken" >"$T/smp" 2>"$T/err"
expect_rc 0 $? "train with --sample 300"
raw=$(LC_ALL=C tr -d '\n\t' <"$T/smp" | LC_ALL=C tr -d ' -~\200-\377' | wc -c)
c1=$(LC_ALL=C grep -c $'\xc2[\x80-\x9f]' "$T/smp")
[ "$raw" = 0 ] && [ "$c1" = 0 ] && grep -q '\\x' "$T/smp" && grep -q -- '--- end of sample ---' "$T/smp" &&
    ok "--sample escapes control bytes (\\xNN; line breaks and tabs kept)" ||
    bad "--sample: $raw raw control bytes, $c1 C1 controls: $(head -c 200 "$T/smp" | cat -v)"
# the enum options spelled by the library's tables (tr_device_name / tr_precision_name): an unknown
# name lists them; "gpu" still means cuda
run 64 "unknown --device" "unknown --device 'tpu' (cpu or cuda)" -- "$LLM" --plan --data "$T/shards" --model tiny --device tpu
run 64 "unknown --precision" "unknown --precision 'fp8' (fp32, bf16 or fp16)" -- "$LLM" --plan --data "$T/shards" --model tiny --precision fp8
"$LLM" --plan --data "$T/shards" --model tiny --seq-len 32 --token-budget 256 --device gpu >"$T/p1" 2>&1
"$LLM" --plan --data "$T/shards" --model tiny --seq-len 32 --token-budget 256 --device cuda >"$T/p2" 2>&1
cmp -s "$T/p1" "$T/p2" && grep -q "cuda" "$T/p1" && ok "--device gpu = --device cuda" || bad "--device gpu: $(head -3 "$T/p1")"
# --optim NAME: the optimizer registry (train/optims.c.in); an unknown name is a usage error listing
# this build's; the default's name plans and trains as no --optim does
run 64 "unknown --optim" "unknown --optim 'sgd' (adamw" -- "$LLM" --plan --data "$T/shards" --model tiny --optim sgd
run 64 "mkshards plan unknown --optim" "unknown --optim 'sgd' (adamw" -- "$MKS" plan --model tiny --seq-len 32 --optim sgd
"$LLM" --plan --data "$T/shards" --model tiny --seq-len 32 --token-budget 256 --optim adamw >"$T/p1" 2>&1
"$LLM" --plan --data "$T/shards" --model tiny --seq-len 32 --token-budget 256 >"$T/p2" 2>&1
cmp -s "$T/p1" "$T/p2" && grep -q "AdamW\|adamw" "$T/p1" && ok "--optim adamw plans as the default" ||
    bad "--optim adamw plan differs: $(diff "$T/p1" "$T/p2" | head -4)"
"$LLM" --data "$T/shards" --model tiny --seq-len 32 --steps 3 --token-budget 256 --optim adamw --log "$T/o1.jsonl" --quiet 2>"$T/err"
expect_rc 0 $? "train --optim adamw"
"$LLM" --data "$T/shards" --model tiny --seq-len 32 --steps 3 --token-budget 256 --log "$T/o2.jsonl" --quiet 2>"$T/err"
[ "$(grep -o '"loss":[^,]*' "$T/o1.jsonl")" = "$(grep -o '"loss":[^,]*' "$T/o2.jsonl")" ] && [ -s "$T/o1.jsonl" ] &&
    ok "--optim adamw trains as the default (losses identical)" || bad "--optim adamw losses differ"
"$LLM" --plan --data "$T/shards" --model tiny --seq-len 32 --token-budget 256 --batch-tokens 1024 >"$T/out" 2>"$T/err"
expect_rc 0 $? "plan fits"
grep -q "micro-batch 8 rows x 32 = 256 tokens" "$T/out" && ok "plan picks B = budget / T" || bad "plan B: $(head -3 "$T/out")"
"$LLM" --plan --data "$T/shards" --model tiny --seq-len 32 --token-budget 256 --batch-tokens 1024 --mem-budget 1M >"$T/out" 2>"$T/err"
expect_rc 3 $? "plan over a 1 MiB budget refused"
grep -q "would fit with" "$T/err" && grep -q "DOES NOT FIT" "$T/out" && ok "refusal says why and what fits" || bad "refusal message: $(cat "$T/err")"
"$LLM" --plan --model d12 --seq-len 1024 --token-budget 8192 --batch-tokens 524288 --device cuda --precision bf16 --recompute 1 --mem-budget 40GiB --json >"$T/out" 2>"$T/err"
expect_rc 0 $? "GPU bf16 plan"
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["fits"] and p["micro_rows"]==8 and p["total_bytes"]<=40*2**30, p' "$T/out" &&
    ok "JSON plan" || bad "JSON plan: $(head -c 300 "$T/out")"
"$MKS" plan --model d48 --seq-len 2048 --token-budget 65536 --batch-tokens 524288 --device cuda --mem-budget 16GiB >"$T/out" 2>"$T/err"
expect_rc 3 $? "mkshards plan: d48 on 16 GiB refused"
# the advice names only recompute levels the GPU trainer runs (TR_GPU_RECOMPUTE_MAX: 1): on 2900
# MiB only --recompute 2 would fit (not offered), on 3020 MiB --recompute 1 does (offered)
"$MKS" plan --model d12 --seq-len 1024 --token-budget 65536 --batch-tokens 524288 --device cuda --precision bf16 \
    --mem-budget 2900MiB >"$T/out" 2>"$T/err"
expect_rc 3 $? "mkshards plan: d12 bf16 on 2900 MiB refused"
grep -q -- "--seq-len 512" "$T/err" && ! grep -q -- "--recompute" "$T/err" && ok "advice without --recompute 2" ||
    bad "advice: $(cat "$T/err")"
"$MKS" plan --model d12 --seq-len 1024 --token-budget 65536 --batch-tokens 524288 --device cuda --precision bf16 \
    --mem-budget 3020MiB >"$T/out" 2>"$T/err"
expect_rc 3 $? "mkshards plan: d12 bf16 on 3020 MiB refused"
grep -q -- "--recompute 1;" "$T/err" && ok "advice offers --recompute 1" || bad "advice: $(cat "$T/err")"
"$MKS" plan --model d12 --seq-len 1024 --token-budget 65536 --batch-tokens 524288 --device cuda --precision bf16 \
    --mem-budget 3020MiB --recompute 1 >"$T/out" 2>"$T/err"
expect_rc 0 $? "mkshards plan: with --recompute 1 it fits"
"$MKS" plan --model tiny --seq-len 100 --token-budget 64 --vocab-size 512 >"$T/out" 2>"$T/err"
expect_rc 3 $? "row longer than the token budget refused"
grep -q "token budget" "$T/err" && ok "token budget reason" || bad "reason: $(cat "$T/err")"

# ---- device
"$LLM" --data "$T/shards" --model tiny --seq-len 32 --steps 2 --token-budget 256 --batch-tokens 256 --device cuda >"$T/out" 2>"$T/err"
expect_rc 2 $? "--device cuda without a CUDA backend"
grep -q "CUDA" "$T/err" && ok "cuda message" || bad "cuda message: $(cat "$T/err")"

# ---- training log fields + budget over random shard sets
for i in 1 2 3; do
    L=$((9 + RANDOM % 40)); S=$((4 + RANDOM % (L - 4))); B=$((S * (1 + RANDOM % 4) + RANDOM % S)); M=$((S * (1 + RANDOM % 10)))
    "$MKS" build -t "$T/tok.tiktoken" -L $L -o "$T/r$i" --pack $([ $((RANDOM % 2)) = 0 ] && echo concat || echo bfd) \
        --val-fraction 0.05 --seed $RANDOM -q "$ROOT/samples/tiny.jsonl" || { bad "build r$i"; continue; }
    "$LLM" --data "$T/r$i" --model tiny --seq-len $S --steps 3 --token-budget $B --batch-tokens $M --doc-mask \
        --seed $i --log "$T/r$i.jsonl" --quiet >"$T/out" 2>"$T/err"
    expect_rc 0 $? "train L=$L T=$S budget=$B batch=$M"
    python3 - "$T/r$i.jsonl" $B <<'EOF' && ok "log fields; micro-batches <= $B tokens" || bad "log r$i"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r for r in rows if "loss" in r]
assert len(steps) == 3, steps
for r in steps:
    for k in ("step", "loss", "tokens", "lr", "grad_norm", "tok_per_s", "wait_ms"):
        assert k in r, (k, r)
    assert r["micro_tokens"] <= int(sys.argv[2]), r
EOF
done

# ---- bit-exact resume
common=(--data "$T/shards" --model tiny --seq-len 32 --steps 8 --token-budget 128 --batch-tokens 256 --seed 7 --val-every 4 --quiet)
"$LLM" "${common[@]}" --log "$T/a.jsonl" --ckpt-dir "$T/ca" 2>"$T/err"; expect_rc 0 $? "uninterrupted run"
"$LLM" "${common[@]}" --log "$T/b.jsonl" --ckpt-dir "$T/cb" --ckpt-every 2 --stop-after 5 2>"$T/err"; expect_rc 0 $? "run stopped at step 5"
"$LLM" "${common[@]}" --log "$T/b.jsonl" --ckpt-dir "$T/cb" --ckpt-every 2 --resume 2>"$T/err"; expect_rc 0 $? "resumed run"
if [ "$(grep -o '"loss":[^,]*' "$T/a.jsonl")" = "$(grep -o '"loss":[^,]*' "$T/b.jsonl")" ] &&
   [ "$(grep -c '"loss"' "$T/a.jsonl")" = 8 ]; then ok "resume: losses bit-identical"; else
    bad "resume losses differ"; paste <(grep -o '"loss":[^,]*' "$T/a.jsonl") <(grep -o '"loss":[^,]*' "$T/b.jsonl"); fi

# a run killed after its last checkpoint logged steps that the resume redoes:
# the log keeps only the checkpointed steps, then the resumed ones
"$LLM" "${common[@]}" --log "$T/c.jsonl" --ckpt-dir "$T/cc" --stop-after 5 2>"$T/err"
echo '{"step":6,"loss":123,"tokens":1,"lr":0}' >>"$T/c.jsonl"
printf '{"step":7,"lo' >>"$T/c.jsonl"
"$LLM" "${common[@]}" --log "$T/c.jsonl" --ckpt-dir "$T/cc" --resume 2>"$T/err"; expect_rc 0 $? "resume after a killed run"
cmp -s <(grep -o '"step":[0-9]*,"loss":[^,]*' "$T/a.jsonl") <(grep -o '"step":[0-9]*,"loss":[^,]*' "$T/c.jsonl") &&
    ok "log after resume = uninterrupted log" || { bad "log after resume"; cat "$T/c.jsonl"; }
# kill -9 at a random moment (whatever step it reached), then resume
KS=60
grep -qa __asan_init "$LLM" && KS=16 # sanitizer builds are ~50x slower
"$LLM" "${common[@]}" --steps $KS --log "$T/k0.jsonl" --ckpt-dir "$T/k0" 2>"$T/err"
"$LLM" "${common[@]}" --steps $KS --log "$T/k1.jsonl" --ckpt-dir "$T/k1" --ckpt-every 7 2>"$T/err" &
kpid=$!
sleep 0.$((15 + RANDOM % 30)); kill -9 $kpid 2>/dev/null; wait $kpid 2>/dev/null
killed_at=$(grep -c '"loss"' "$T/k1.jsonl" 2>/dev/null)
"$LLM" "${common[@]}" --steps $KS --log "$T/k1.jsonl" --ckpt-dir "$T/k1" --ckpt-every 7 --resume 2>"$T/err"
expect_rc 0 $? "resume after kill -9 at step ${killed_at:-0} of $KS"
cmp -s <(grep -o '"step":[0-9]*,"loss":[^,]*' "$T/k0.jsonl") <(grep -o '"step":[0-9]*,"loss":[^,]*' "$T/k1.jsonl") &&
    ok "kill -9 + resume: losses bit-identical" || bad "kill -9 + resume: losses differ"

# ---- wrong tokenizer
"$MKS" tokenizer train --vocab-size 400 --out "$T/tok2.tiktoken" -s '<|endoftext|>' -q "$ROOT/samples/notes.txt" 2>/dev/null
"$LLM" --data "$T/shards" --model tiny --seq-len 32 --steps 2 --token-budget 128 --batch-tokens 128 --tokenizer "$T/tok2.tiktoken" >"$T/out" 2>"$T/err"
expect_rc 2 $? "--tokenizer differing from the shards' refused"
grep -q "fingerprint" "$T/err" && ok "tokenizer message: $(head -c 120 "$T/err")" || bad "message: $(cat "$T/err")"
"$MKS" build -t "$T/tok2.tiktoken" -L 33 -o "$T/shards2" -q "$ROOT/samples/tiny.jsonl" || bad "build shards2"
"$LLM" "${common[@]}" --data "$T/shards2" --steps 10 --ckpt-dir "$T/ca" --resume >"$T/out" 2>"$T/err"
expect_rc 2 $? "resume on shards of another tokenizer refused"
grep -q "tokenizer" "$T/err" && ok "resume tokenizer message" || bad "message: $(cat "$T/err")"

# ---- corrupt shard
cp -r "$T/shards" "$T/bad"
f=$(ls "$T/bad"/train-*.mks | head -1)
sz=$(stat -c %s "$f")
printf '\xff\xff\xff\xff' | dd of="$f" bs=1 seek=$((sz / 2)) conv=notrunc status=none
"$LLM" --data "$T/bad" --model tiny --seq-len 32 --steps 2 --token-budget 128 --batch-tokens 128 >"$T/out" 2>"$T/err"
expect_rc 2 $? "corrupt shard refused"
grep -qi "train-" "$T/err" && ok "corrupt message: $(head -c 160 "$T/err")" || bad "message: $(cat "$T/err")"

exit $fail
