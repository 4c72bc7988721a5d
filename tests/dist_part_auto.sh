#!/usr/bin/env bash
# dist_part_auto.sh MPIEXEC MKSHARDS ROOT - `mkshards build --part auto` under
# mpirun: each of 2 (and 3) ranks builds the part its launcher environment
# names (OMPI_COMM_WORLD_RANK/SIZE) into its own folder, `mkshards merge` joins
# them, and every file of the result is byte-identical to one plain build.
# Also: the same under a simulated Slurm job array (SLURM_ARRAY_TASK_*), and
# --part auto without a launcher is a usage error (exit 64).
set -u
MPIEXEC=$1
MKS=$2
ROOT=$3
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }

"$MKS" tokenizer train --vocab-size 512 --out "$T/tok.tiktoken" -s '<|endoftext|>' -q "$ROOT/samples/tiny.jsonl" \
    2>/dev/null || { bad "tokenizer train"; exit 1; }
mkdir "$T/in"
split -n l/5 -d --additional-suffix=.jsonl "$ROOT/samples/tiny.jsonl" "$T/in/x"
B=(-t "$T/tok.tiktoken" -L 33 --val-fraction 0.05 --shard-tokens 2000 -q)
"$MKS" build "${B[@]}" -o "$T/one" "$T/in" || { bad "single build"; exit 1; }

same() { # dir what
    if diff -r "$T/one" "$1" > "$T/diff" 2>&1; then
        ok "$2: every file byte-identical to one build ($(ls "$1" | wc -l) files)"
    else
        bad "$2 differs from one build: $(head -3 "$T/diff")"
    fi
}

for np in 2 3; do
    export MKS T np
    export B_ARGS="${B[*]}"
    if ! "$MPIEXEC" -np "$np" --oversubscribe bash -c \
        '"$MKS" build $B_ARGS --part auto -o "$T/np$np-p$OMPI_COMM_WORLD_RANK" "$T/in"' 2> "$T/err"; then
        bad "mpirun -np $np mkshards build --part auto: $(head -3 "$T/err")"
        continue
    fi
    grep -q "part $np/$np (OMPI_COMM_WORLD_RANK=$((np - 1)) of OMPI_COMM_WORLD_SIZE=$np)" "$T/err" &&
        ok "np $np: the ranks name their parts" || bad "np $np: no 'part K/N' line: $(head -3 "$T/err")"
    parts=()
    for ((r = 0; r < np; r++)); do parts+=("$T/np$np-p$r"); done
    if "$MKS" merge -q --out "$T/np$np-merged" "${parts[@]}"; then
        same "$T/np$np-merged" "mpirun -np $np --part auto + merge"
    else
        bad "merge of the $np parts"
    fi
done

# a Slurm job array --array=1-3 (no srun): SLURM_ARRAY_TASK_ID 1..3, MIN 1
for id in 1 2 3; do
    env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE SLURM_ARRAY_TASK_ID=$id SLURM_ARRAY_TASK_MIN=1 \
        SLURM_ARRAY_TASK_COUNT=3 SLURM_ARRAY_TASK_STEP=1 SLURM_PROCID=0 \
        "$MKS" build "${B[@]}" --part auto -o "$T/arr$id" "$T/in" 2> /dev/null || bad "array task $id"
done
"$MKS" merge -q --out "$T/arr-merged" "$T/arr1" "$T/arr2" "$T/arr3" && same "$T/arr-merged" "job array 1-3 + merge" ||
    bad "merge of the array parts"

env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u PMI_RANK -u PMI_SIZE -u SLURM_ARRAY_TASK_ID \
    -u SLURM_PROCID -u SLURM_STEP_NUM_TASKS "$MKS" build "${B[@]}" --part auto -o "$T/none" "$T/in" 2> "$T/err"
rc=$?
[ $rc -eq 64 ] && grep -q "no launcher" "$T/err" && ok "--part auto without a launcher: exit 64, $(head -c 90 "$T/err")" ||
    bad "--part auto without a launcher: exit $rc: $(head -2 "$T/err")"
exit $fail
