#!/usr/bin/env bash
# dist_bench.sh MPIEXEC LLMTRAIN DATA [RUNS] - a measurement, not a ctest
# (docs/cluster.md, "Speed"): the same global batch trained by
#   1p2t     one process, 2 OpenMP threads (2 micro-batches per step)
#   np2      mpirun -np 2 --bind-to core, 1 thread each, overlap (25 MiB buckets)
#   np2-seq  the same without overlap (MKS_DP_BUCKET_MB=0: reduce after backward)
#   np2-z    np2 with --zero 1
# RUNS times each (default 3), interleaved; per config: the best and median
# step time over steps 2.. of every run (step 1 warms up), tokens/s of the
# best, and CPU seconds (user + sys of the whole command) per step. Extra
# llmtrain options: BENCH_ARGS (default d12, T=32, 128 tokens/step).
set -u
MPI=$1 LLM=$2 DATA=$3 RUNS=${4:-3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ARGS=(${BENCH_ARGS:---model d12 --seq-len 32 --batch-tokens 128 --token-budget 64 --steps 4})
export OMP_WAIT_POLICY=passive MKS_DP_STATS=1
run() { # name cmd...
    local n=$1; shift
    /usr/bin/time -f "%U %S" -o "$T/$n.time" "$@" --data "$DATA" --no-verify "${ARGS[@]}" --log "$T/$n.jsonl" \
        > "$T/$n.out" 2>&1 || { echo "FAIL $n: $(tail -3 "$T/$n.out")"; return 1; }
    cat "$T/$n.time" >> "$T/${n%_*}.cpu"
    python3 - "$T/$n.jsonl" >> "$T/${n%_*}.steps" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "step_ms" in d and d["step"] > 1: print(d["step_ms"], d["tokens"])
PY
    grep "dp stats" "$T/$n.out" >> "$T/${n%_*}.stats"
}
for i in $(seq "$RUNS"); do
    OMP_NUM_THREADS=2 run "1p2t_$i" "$LLM"
    OMP_NUM_THREADS=1 run "np2_$i" "$MPI" -np 2 --bind-to core -x OMP_NUM_THREADS -x OMP_WAIT_POLICY -x MKS_DP_STATS "$LLM"
    OMP_NUM_THREADS=1 MKS_DP_BUCKET_MB=0 run "np2-seq_$i" "$MPI" -np 2 --bind-to core -x OMP_NUM_THREADS \
        -x OMP_WAIT_POLICY -x MKS_DP_STATS -x MKS_DP_BUCKET_MB "$LLM"
    OMP_NUM_THREADS=1 run "np2-z_$i" "$MPI" -np 2 --bind-to core -x OMP_NUM_THREADS -x OMP_WAIT_POLICY -x MKS_DP_STATS \
        "$LLM" --zero 1
done
echo "config    best step  median step  tok/s(best)  CPU s/step (user+sys, whole command incl. start-up)"
for c in 1p2t np2 np2-seq np2-z; do
    python3 - "$T/$c.steps" "$T/$c.cpu" "$c" <<'PY'
import sys, statistics
st = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
cpu = [sum(map(float, l.split())) for l in open(sys.argv[2]) if l.strip()]
ms = sorted(s for s, _ in st)
tok = st[0][1]
nsteps = len(st) / max(1, len(cpu)) + 1  # steps per run incl. the first
print("%-8s %8.0f ms  %8.0f ms  %10.1f  %8.1f" % (sys.argv[3], ms[0], statistics.median(ms), tok / ms[0] * 1e3,
      statistics.median(cpu) / nsteps))
PY
    [ -s "$T/$c.stats" ] && sed 's/^/    /' "$T/$c.stats" | sort | tail -2
done
