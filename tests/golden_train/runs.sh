#!/usr/bin/env bash
# runs.sh LLMTRAIN INPUTS OUT - the golden llmtrain runs (tests/golden_train).
#
# Runs llmtrain on the committed shard sets in INPUTS (made by record.sh) and
# writes OUT/summary.txt: per run, one line per optimiser step with the
# values the JSONL log carries that do not depend on timing (step, loss,
# lr, grad_norm, target tokens, micro-batches, epoch, val_loss), then the
# sha256 of the final checkpoint (params + AdamW moments + loader position:
# bit-exact state after the last step) and, for the plain run, the sample.
# The log writes loss as %.9g of a double and grad_norm as %.9g of a float
# (exact); the checkpoint digest makes the comparison bit-exact.
#
# Runs: plain (concat shards, one micro-batch per step, validation, sample),
# docmask (bfd shards, --doc-mask), accum (4 micro-batches per step, the last
# one shorter), accum_docmask, and resume: a run stopped at step 4 whose log
# then got the lines a killed run leaves (a finished step 5 and a cut line),
# resumed to step 7 (--stop-after) and resumed again to the end; it must
# equal resume_ref, the same run uninterrupted.
#
# Pinned: OMP_NUM_THREADS=2 (kernel threads; results are the same for any count). Exit 0, or 1 when a run fails.
set -u
LLM=$1
IN=$2
OUT=$3
export OMP_NUM_THREADS=2
# busy-waiting OpenMP threads make a loaded 2-core machine 10x slower
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
mkdir -p "$OUT"
S="$OUT/summary.txt"
: >"$S"
fail=0

summarize() { # name log [ckptdir]
    python3 - "$1" "$2" >>"$S" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
for line in open(path):
    r = json.loads(line)
    if "loss" not in r:
        continue
    keys = ["step", "loss", "lr", "grad_norm", "tokens", "target_tokens", "micro_batches", "micro_tokens", "epoch"]
    if "val_loss" in r:
        keys += ["val_loss", "val_rows"]
    print(name, " ".join("%s=%s" % (k, json.dumps(r[k])) for k in keys))
PY
    if [ -n "${3:-}" ]; then
        echo "$1 ckpt sha256=$(sha256sum <"$3/ckpt.bin" | cut -c1-64)" >>"$S"
    fi
}

run() { # name args...
    local name=$1
    shift
    if ! "$LLM" "$@" >"$OUT/$name.out" 2>"$OUT/$name.err"; then
        echo "FAIL run $name: exit $?: $(head -c 300 "$OUT/$name.err")" >&2
        fail=1
    fi
}

base=(--model tiny --steps 8 --seed 11 --lr 3e-3 --warmup 2 --val-every 4 --val-rows 12 --log-every 1 --no-verify)

run plain --data "$IN/concat" "${base[@]}" --seq-len 32 --token-budget 256 --batch-tokens 256 \
    --log "$OUT/plain.jsonl" --ckpt-dir "$OUT/c_plain" --sample 24
summarize plain "$OUT/plain.jsonl" "$OUT/c_plain"
# the sample: token ids (no --tokenizer, the shards' tokenizer is "custom")
sed -n '/^--- sample/,/^[0-9]/p' "$OUT/plain.out" | sed 's/^/plain sample /' >>"$S"

run docmask --data "$IN/bfd" "${base[@]}" --seq-len 32 --token-budget 256 --batch-tokens 256 --doc-mask \
    --log "$OUT/docmask.jsonl" --ckpt-dir "$OUT/c_docmask"
summarize docmask "$OUT/docmask.jsonl" "$OUT/c_docmask"

run accum --data "$IN/concat" "${base[@]}" --seq-len 24 --token-budget 48 --batch-tokens 168 \
    --log "$OUT/accum.jsonl" --ckpt-dir "$OUT/c_accum"
summarize accum "$OUT/accum.jsonl" "$OUT/c_accum"

run accum_docmask --data "$IN/bfd" "${base[@]}" --seq-len 32 --token-budget 64 --batch-tokens 256 --doc-mask \
    --log "$OUT/accum_docmask.jsonl" --ckpt-dir "$OUT/c_accum_docmask"
summarize accum_docmask "$OUT/accum_docmask.jsonl" "$OUT/c_accum_docmask"

res=(--data "$IN/bfd" --model tiny --steps 10 --seed 5 --lr 2e-3 --val-every 3 --val-rows 8 --no-verify
    --seq-len 32 --token-budget 64 --batch-tokens 160 --doc-mask --ckpt-every 3)
run resume_ref "${res[@]}" --log "$OUT/resume_ref.jsonl" --ckpt-dir "$OUT/c_ref"
summarize resume_ref "$OUT/resume_ref.jsonl" "$OUT/c_ref"
run resume_a "${res[@]}" --log "$OUT/resume.jsonl" --ckpt-dir "$OUT/c_res" --stop-after 4
# what a run killed during step 6 leaves: step 5 logged, not checkpointed
echo '{"step":5,"loss":9.5,"lr":0.001,"grad_norm":1,"tokens":160}' >>"$OUT/resume.jsonl"
printf '{"step":6,"lo' >>"$OUT/resume.jsonl"
run resume_b "${res[@]}" --log "$OUT/resume.jsonl" --ckpt-dir "$OUT/c_res" --resume --stop-after 7
run resume_c "${res[@]}" --log "$OUT/resume.jsonl" --ckpt-dir "$OUT/c_res" --resume
summarize resume "$OUT/resume.jsonl" "$OUT/c_res"
grep -h '^resumed from' "$OUT/resume_b.out" "$OUT/resume_c.out" | sed "s|$OUT/||; s/^/resume msg /" >>"$S"

exit $fail
