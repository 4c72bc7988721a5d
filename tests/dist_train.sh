#!/usr/bin/env bash
# dist_train.sh MPIEXEC LLMTRAIN DATA [same|resume|llama|codes|fail] - data-parallel llmtrain on the CPU
# (issue 16; tiny model on the golden shard set, a few seconds each):
#   - mpirun -np 2 == one process with 2 micro-batches, bit for bit: every
#     logged step value and the final checkpoint (params + AdamW moments);
#     -np 4 == one process with 4 micro-batches, likewise; -np 2 with 2
#     micro-batches per rank within 1e-5 relative of one process (the sum
#     is grouped per rank there);
#   - --zero 1 == no ZeRO (checkpoint digest), for 2 and 4 ranks;
#   - overlap: 2 KiB gradient buckets (MKS_DP_BUCKET_MB) and no overlap (0)
#     give the same bits as the default 25 MiB buckets, with accumulation;
#   - validation is shared over the ranks: val_loss compared bit for bit;
#   - (resume) resume: stopped after 2 steps and resumed on the same N == the
#     uninterrupted run; resumed on another N (4 ranks, 1 process) completes
#     and stays within 1e-4; a ZeRO-1 checkpoint (1/N of the moments per
#     rank, gathered by rank 0) resumed on 4 ranks with ZeRO-1 and by one
#     process;
#   - (llama) the Llama family (llama-tiny): 2 ranks == 1 process and ZeRO-1
#     == no ZeRO bit for bit, 2 x 2 micro-batches within 1e-5, resume on 2
#     ranks with and without ZeRO-1 and a ZeRO-1 checkpoint resumed by one
#     process, bit for bit;
#   - (codes) a refusal exits with the status the command gives alone (64
#     usage, 3 does not fit, 2 corrupt checkpoint), not MPI_Abort's 1: every
#     rank refusing alike agrees and finalizes (no abort); one rank refusing
#     while the other trains aborts the job with the status;
#   - (fail) failure: a rank killed with SIGKILL mid-run, or stopped (SIGSTOP, only
#     the deadline sees it), ends the job non-zero within 60 s, naming it;
#     rank 0 failing to write a ZeRO-1 checkpoint ends every rank at once;
#     a launcher environment MPI does not understand (srun without PMI,
#     MPICH's variables: simulated) is refused instead of N world-1 copies.
set -u
MPI=$1
LLM=$2
DATA=$3
MODE=${4:-same}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
A=(--data "$DATA" --model tiny --steps 4 --seed 11 --lr 3e-3 --warmup 2 --no-verify --seq-len 32
   --batch-tokens 256 --val-every 2 --val-rows 8)
one() { # name args...
    local n=$1; shift
    "$LLM" "${A[@]}" --log "$T/$n.jsonl" --ckpt-dir "$T/c_$n" "$@" > "$T/$n.out" 2>&1 || bad "run $n: $(tail -2 "$T/$n.out")"
}
mpi() { # np name args...
    local np=$1 n=$2; shift 2
    "$MPI" -np "$np" --oversubscribe "$LLM" "${A[@]}" --log "$T/$n.jsonl" --ckpt-dir "$T/c_$n" "$@" \
        > "$T/$n.out" 2>&1 || bad "mpirun -np $np $n: $(tail -3 "$T/$n.out")"
}
# cmp_logs a b tol: per-step loss, grad_norm, lr, val_loss, tokens (tol 0: identical)
cmp_logs() { python3 "$(dirname "$0")/train_log_cmp.py" "$T/$1.jsonl" "$T/$2.jsonl" "$3"; }
same_ckpt() { cmp -s "$T/c_$1/ckpt.bin" "$T/c_$2/ckpt.bin"; }

if [ "$MODE" = same ]; then
one p2 --token-budget 128
one p4 --token-budget 64
mpi 2 r2 --token-budget 128
mpi 4 r4 --token-budget 64
mpi 2 r2x2 --token-budget 64
mpi 2 z2 --token-budget 128 --zero 1
mpi 4 z4 --token-budget 64 --zero 1

# overlap (gradient buckets reduced while backward runs): tiny buckets (many
# per layer and tensor) and none at all (MKS_DP_BUCKET_MB=0) give the same bits
MKS_DP_BUCKET_MB=0.002 mpi 2 b2 --token-budget 128
MKS_DP_BUCKET_MB=0.002 mpi 2 b2x2 --token-budget 64 --zero 1
MKS_DP_BUCKET_MB=0 mpi 2 n2x2 --token-budget 64
m=$(cmp_logs p2 b2 0) && same_ckpt p2 b2 && ok "2 ranks, 2 KiB buckets (overlap) == 1 process ($m)" || bad "small buckets: $m"
m=$(cmp_logs r2x2 b2x2 0) && same_ckpt r2x2 b2x2 && m2=$(cmp_logs r2x2 n2x2 0) && same_ckpt r2x2 n2x2 &&
    ok "2 ranks x 2 micro-batches: 25 MiB buckets == 2 KiB buckets + ZeRO-1 == no overlap ($m)" ||
    bad "overlap with accumulation: $m $m2"
m=$(cmp_logs p2 r2 0) && same_ckpt p2 r2 && ok "2 ranks == 1 process x 2 micro-batches, bit for bit ($m; checkpoint identical)" ||
    bad "2 ranks vs 1 process: $m"
m=$(cmp_logs p4 r4 0) && same_ckpt p4 r4 && ok "4 ranks == 1 process x 4 micro-batches, bit for bit ($m; checkpoint identical)" ||
    bad "4 ranks vs 1 process: $m"
m=$(cmp_logs p4 r2x2 1e-5) && ok "2 ranks x 2 micro-batches vs 1 process x 4: $m (<= 1e-5)" || bad "2x2 vs 4: $m"
m=$(cmp_logs r2 z2 0) && same_ckpt r2 z2 && ok "ZeRO-1 == no ZeRO on 2 ranks ($m; checkpoint identical)" || bad "ZeRO-1 on 2: $m"
m=$(cmp_logs r4 z4 0) && same_ckpt r4 z4 && ok "ZeRO-1 == no ZeRO on 4 ranks ($m; checkpoint identical)" || bad "ZeRO-1 on 4: $m"
grep -q "^step" "$T/r2.out" && [ "$(grep -c '^step .*loss' "$T/r2.out")" -eq 6 ] && ok "rank 0 alone prints (4 steps + 2 validations)" ||
    bad "output of 2 ranks: $(grep -c '^step' "$T/r2.out") step lines"

exit $fail
fi

if [ "$MODE" = resume ]; then
mpi 2 r2 --token-budget 128 # the uninterrupted run
# resume on the same N (2 ranks, ZeRO-1: the checkpoint holds the full moments)
mpi 2 res --token-budget 128 --zero 1 --stop-after 2
"$MPI" -np 2 --oversubscribe "$LLM" "${A[@]}" --log "$T/res.jsonl" --ckpt-dir "$T/c_res" --token-budget 128 --zero 1 \
    --resume > "$T/res2.out" 2>&1 || bad "resume -np 2: $(tail -2 "$T/res2.out")"
m=$(cmp_logs r2 res 0) && same_ckpt r2 res && ok "2 ranks stopped at 2 + resumed == uninterrupted ($m)" || bad "resume: $m"
# resume on another N: 2 ranks' checkpoint continued on 4 ranks, and by one process
mpi 2 rn --token-budget 128 --stop-after 2
cp -r "$T/c_rn" "$T/c_rn1"
"$MPI" -np 4 --oversubscribe "$LLM" "${A[@]}" --log "$T/rn.jsonl" --ckpt-dir "$T/c_rn" --token-budget 128 \
    --resume > "$T/rn2.out" 2>&1 || bad "resume on 4 ranks: $(tail -2 "$T/rn2.out")"
m=$(cmp_logs r2 rn 1e-4) && ok "2-rank checkpoint resumed on 4 ranks: $m" || bad "resume on 4: $m"
cp "$T/rn.jsonl" "$T/rn1.jsonl" 2>/dev/null
"$LLM" "${A[@]}" --log "$T/rn1.jsonl" --ckpt-dir "$T/c_rn1" --token-budget 128 --resume > "$T/rn3.out" 2>&1 ||
    bad "resume in one process: $(tail -2 "$T/rn3.out")"
m=$(cmp_logs r2 rn1 0) && ok "2-rank checkpoint resumed by one process (2 micro-batches): $m" || bad "resume on 1: $m"

# ZeRO-1 checkpoints (each rank holds 1/N of the moments; rank 0 writes the
# full ones) resumed on another N: 4 ranks with ZeRO-1, and one process
mpi 2 zn --token-budget 128 --zero 1 --stop-after 2
cp -r "$T/c_zn" "$T/c_zn1"
"$MPI" -np 4 --oversubscribe "$LLM" "${A[@]}" --log "$T/zn.jsonl" --ckpt-dir "$T/c_zn" --token-budget 128 --zero 1 \
    --resume > "$T/zn2.out" 2>&1 || bad "ZeRO-1 resume on 4 ranks: $(tail -2 "$T/zn2.out")"
m=$(cmp_logs r2 zn 1e-4) && ok "2-rank ZeRO-1 checkpoint resumed on 4 ranks with ZeRO-1 (re-sharded): $m" ||
    bad "ZeRO-1 resume on 4: $m"
cp "$T/zn.jsonl" "$T/zn1.jsonl" 2>/dev/null
"$LLM" "${A[@]}" --log "$T/zn1.jsonl" --ckpt-dir "$T/c_zn1" --token-budget 128 --resume > "$T/zn3.out" 2>&1 ||
    bad "ZeRO-1 checkpoint resumed by one process: $(tail -2 "$T/zn3.out")"
m=$(cmp_logs r2 zn1 0) && ok "2-rank ZeRO-1 checkpoint resumed by one process (2 micro-batches): $m" ||
    bad "ZeRO-1 resume on 1: $m"

exit $fail
fi

if [ "$MODE" = llama ]; then
# the Llama family (llama-tiny: GQA 4/2, RMSNorm, RoPE, SwiGLU) under the same
# data-parallel paths: its one contiguous parameter buffer is all-reduced and
# ZeRO-1-sharded through the family's tensor table (train/family.h)
A=("${A[@]/#tiny/llama-tiny}")
one p2 --token-budget 128
mpi 2 r2 --token-budget 128
mpi 2 z2 --token-budget 128 --zero 1
one p4 --token-budget 64
mpi 2 r2x2 --token-budget 64
grep -q "^family 1" "$T/c_r2/model.txt" 2>/dev/null && ok "llama-tiny: the checkpoint records the Llama family (model.txt)" ||
    bad "llama-tiny: no Llama model.txt in the 2-rank checkpoint"
m=$(cmp_logs p2 r2 0) && same_ckpt p2 r2 && ok "llama-tiny: 2 ranks == 1 process x 2 micro-batches, bit for bit ($m; checkpoint identical)" ||
    bad "llama-tiny 2 ranks vs 1 process: $m"
m=$(cmp_logs r2 z2 0) && same_ckpt r2 z2 && ok "llama-tiny: ZeRO-1 == no ZeRO on 2 ranks ($m; checkpoint identical)" ||
    bad "llama-tiny ZeRO-1 on 2: $m"
m=$(cmp_logs p4 r2x2 1e-5) && ok "llama-tiny: 2 ranks x 2 micro-batches vs 1 process x 4: $m (<= 1e-5)" ||
    bad "llama-tiny 2x2 vs 4: $m"
# resume on the same N, with and without ZeRO-1 (model.txt + the gathered moments)
for z in 0 1; do
    mpi 2 res$z --token-budget 128 --zero $z --stop-after 2
    "$MPI" -np 2 --oversubscribe "$LLM" "${A[@]}" --log "$T/res$z.jsonl" --ckpt-dir "$T/c_res$z" --token-budget 128 \
        --zero $z --resume > "$T/res$z.2.out" 2>&1 || bad "llama-tiny resume -np 2 --zero $z: $(tail -2 "$T/res$z.2.out")"
    m=$(cmp_logs r2 res$z 0) && same_ckpt r2 res$z &&
        ok "llama-tiny: 2 ranks (--zero $z) stopped at 2 + resumed == uninterrupted, bit for bit ($m)" ||
        bad "llama-tiny resume --zero $z: $m"
done
# a 2-rank ZeRO-1 checkpoint continued by one process (2 micro-batches)
mpi 2 zn --token-budget 128 --zero 1 --stop-after 2
"$LLM" "${A[@]}" --log "$T/zn.jsonl" --ckpt-dir "$T/c_zn" --token-budget 128 --resume > "$T/zn2.out" 2>&1 ||
    bad "llama-tiny ZeRO-1 checkpoint resumed by one process: $(tail -2 "$T/zn2.out")"
m=$(cmp_logs r2 zn 0) && same_ckpt r2 zn && ok "llama-tiny: 2-rank ZeRO-1 checkpoint resumed by one process: $m" ||
    bad "llama-tiny ZeRO-1 resume on 1: $m"
exit $fail
fi

if [ "$MODE" = codes ]; then
"$LLM" "${A[@]}" --token-budget 128 --steps 2 --ckpt-dir "$T/c_bad" --quiet > "$T/ck.out" 2>&1 || bad "checkpoint: $(tail -2 "$T/ck.out")"
f="$T/c_bad/ckpt.bin"
printf '\xff\xff\xff\xff' | dd of="$f" bs=1 seek=$(($(stat -c %s "$f") / 2)) conv=notrunc status=none
for c in "64 usage --bogus" "3 nofit --mem-budget 1M" "2 corrupt-checkpoint --steps 4 --ckpt-dir $T/c_bad --resume"; do
    set -- $c
    want=$1 what=$2; shift 2
    "$LLM" "${A[@]}" --token-budget 128 "$@" > "$T/alone.out" 2>&1
    alone=$?
    start=$(date +%s)
    timeout 60 "$MPI" -np 2 --oversubscribe "$LLM" "${A[@]}" --token-budget 128 "$@" > "$T/np2.out" 2>&1
    rc=$?
    el=$(($(date +%s) - start))
    if [ "$alone" = "$want" ] && [ "$rc" = "$want" ] && ! grep -q "MPI_ABORT was invoked" "$T/np2.out"; then
        ok "$what: exit $rc under mpirun -np 2 as alone, the ranks agreed (no abort), ${el} s"
    else
        bad "$what: alone exit $alone, mpirun -np 2 exit $rc, want $want: $(grep -v '^ ' "$T/np2.out" | tail -4)"
    fi
done
# one rank refuses (usage) while the other starts a long run: MPI_Abort with the status
start=$(date +%s)
timeout 60 "$MPI" --oversubscribe -np 1 "$LLM" "${A[@]}" --token-budget 128 --bogus : \
    -np 1 "$LLM" "${A[@]}" --token-budget 128 --steps 100000 --quiet > "$T/mixed.out" 2>&1
rc=$?
el=$(($(date +%s) - start))
[ "$rc" = 64 ] && [ "$el" -lt 30 ] && ok "one rank's usage error while the other trains: exit 64 in ${el} s" ||
    bad "one rank's usage error: exit $rc in ${el} s, want 64: $(tail -4 "$T/mixed.out")"
exit $fail
fi

# a launcher this MPI does not understand (simulated: srun without the PMI
# plugin, MPICH's mpiexec) leaves each process a world of 1: refused with a
# message, instead of N copies of one run writing the same checkpoint
for envs in "SLURM_PROCID=0 SLURM_NTASKS=2 SLURM_LOCALID=0" "PMI_RANK=0 PMI_SIZE=2 MPI_LOCALRANKID=0 MPI_LOCALNRANKS=2"; do
    out=$(env $envs timeout 60 "$LLM" "${A[@]}" --token-budget 128 --steps 2 2>&1)
    rc=$?
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && echo "$out" | grep -q "started 2 processes but MPI sees a world of 1"; then
        ok "launcher MPI does not understand ($envs): refused, exit $rc"
    else
        bad "launcher MPI does not understand ($envs): exit $rc: $out"
    fi
done

# failure: rank 0 cannot write a ZeRO-1 checkpoint (ckpt.tmp is a folder):
# the ranks serving it their AdamW shards are released, every rank exits
# non-zero at once, and no checkpoint appears
mkdir -p "$T/c_zfail/ckpt.tmp"
start=$(date +%s)
"$MPI" -np 3 --oversubscribe "$LLM" "${A[@]}" --token-budget 64 --zero 1 --ckpt-dir "$T/c_zfail" \
    > "$T/zfail.out" 2>&1
rc=$?
el=$(($(date +%s) - start))
if [ "$rc" -ne 0 ] && [ "$el" -lt 30 ] && [ ! -e "$T/c_zfail/ckpt.bin" ] && grep -q "cannot write" "$T/zfail.out"; then
    ok "ZeRO-1 checkpoint write failure on rank 0: exit $rc in ${el} s, no ckpt.bin"
else
    bad "ZeRO-1 checkpoint write failure: exit $rc in ${el} s: $(tail -3 "$T/zfail.out")"
fi

# failure: kill -9 / SIGSTOP one rank of a long run
for sig in KILL STOP; do
    start=$(date +%s)
    MKS_COMM_TIMEOUT=5 "$MPI" -np 3 --oversubscribe "$LLM" "${A[@]}" --steps 100000 --token-budget 64 \
        --ckpt-dir "$T/c_kill$sig" --log "$T/kill$sig.jsonl" > "$T/kill$sig.out" 2>&1 &
    mp=$!
    for _ in $(seq 100); do [ -s "$T/kill$sig.jsonl" ] && break; sleep 0.1; done
    kids=($(pgrep -P "$mp"))
    victim=${kids[${#kids[@]}-1]}
    kill -s "$sig" "$victim"
    for _ in $(seq 600); do kill -0 "$mp" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$mp" 2>/dev/null; then
        bad "SIG$sig of one rank: the job still runs after 60 s"
        kill -9 "$mp" "${kids[@]}" 2>/dev/null
        continue
    fi
    wait "$mp"
    rc=$?
    el=$(($(date +%s) - start))
    msg=$(grep -m1 -E "rank [0-9]+.*(exited on signal|nothing from rank|died)" "$T/kill$sig.out")
    if [ "$rc" -ne 0 ] && [ -n "$msg" ]; then
        ok "SIG$sig of one rank: job ended with exit $rc in ${el} s: $msg"
    else
        bad "SIG$sig of one rank: exit $rc, no message naming the rank: $(tail -5 "$T/kill$sig.out")"
    fi
    kill -9 "${kids[@]}" 2>/dev/null
done
exit $fail
