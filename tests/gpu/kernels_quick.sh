#!/usr/bin/env bash
# tests/gpu/kernels_quick.sh - the kernels alone on a lent GPU, in about two minutes:
# a device check for kernel work between two full runs of tests/gpu/run.sh (which
# also trains, compares with PyTorch and sweeps; about six minutes).
#   - builds kernels/*.cu (sm_90, in parallel), their C references, test_kernels_gpu
#     and bench_kernels_gpu with nvcc and gcc only: no C dependencies, no CMake;
#   - runs test_kernels_gpu (every kernel against its C reference, all variants),
#     test_kn_llama_gpu (the Llama family's kernels) and bench_kernels_gpu at d12 B16 T1024;
#   - prints the failed rows, then the kernel timings, and exits non-zero when a
#     row failed or a step did not run.  Logs go to $OUT (or QUICK_OUT).
#
#   run: bash tests/gpu/kernels_quick.sh        (no carry needed)
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
OUTD=${QUICK_OUT:-${OUT:-/tmp/kernels_quick}}
B=${QUICK_BUILD:-/tmp/kernels_quick_build}
mkdir -p "$OUTD" "$B"
T0=$(date +%s)
say() { printf '[quick %4ss] %s\n' "$(($(date +%s) - T0))" "$*"; }
rc=0

say "build (nvcc $(nvcc --version | grep -o 'release [0-9.]*'), $(nproc) CPUs)"
NV=(nvcc -O3 -std=c++17 "-gencode=arch=compute_90,code=sm_90" "-Xcompiler=-Wall,-Wextra" -Ikernels)
for f in kernels/*_ref.c kernels/kn_cuda_err.c kernels/kn_cuda_size.c; do
    gcc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Ikernels -c "$f" -o "$B/$(basename "$f" .c).o" || rc=1
done
pids=()
for f in kernels/*.cu; do
    "${NV[@]}" -c "$f" -o "$B/$(basename "$f" .cu).o" >"$B/$(basename "$f" .cu).log" 2>&1 &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || rc=1; done
cat "$B"/*.log >"$OUTD/build.log" 2>/dev/null
"${NV[@]}" tests/test_kernels_gpu.cu "$B"/*.o -lcublasLt -lm -o "$B/test_kernels_gpu" >>"$OUTD/build.log" 2>&1 || rc=1
"${NV[@]}" tests/bench_kernels_gpu.cu "$B"/*.o -lcublasLt -lm -o "$B/bench_kernels_gpu" >>"$OUTD/build.log" 2>&1 || rc=1
"${NV[@]}" tests/test_kn_llama_gpu.cu "$B"/*.o -lcublasLt -lm -o "$B/test_kn_llama_gpu" >>"$OUTD/build.log" 2>&1 || rc=1
nw=$(grep -ci 'warning' "$OUTD/build.log")
say "build: status $rc, $nw warning lines"
if [ "$rc" != 0 ]; then
    tail -40 "$OUTD/build.log"
    exit 1
fi

say "test_kernels_gpu"
timeout -k 5 150 "$B/test_kernels_gpu" >"$OUTD/test_kernels_gpu.txt" 2>&1
trc=$?
say "test_kernels_gpu: exit $trc, $(grep -c '| PASS' "$OUTD/test_kernels_gpu.txt") rows passed, $(grep -c '| FAIL' "$OUTD/test_kernels_gpu.txt") failed"
grep -E '\| FAIL|FAULT|error' "$OUTD/test_kernels_gpu.txt" | head -40
grep -E '(attention_(forward|backward) \(tc pipe\)|dgelu|layernorm_f).*\| bf16 ' "$OUTD/test_kernels_gpu.txt" | head -16
[ "$trc" = 0 ] || rc=1

# the Llama family's kernels, the tensor-core GQA rows (" tc") among them
say "test_kn_llama_gpu"
timeout -k 5 120 "$B/test_kn_llama_gpu" >"$OUTD/test_kn_llama_gpu.txt" 2>&1
lrc=$?
say "test_kn_llama_gpu: exit $lrc, $(grep -c '| PASS' "$OUTD/test_kn_llama_gpu.txt") rows passed, $(grep -c '| FAIL' "$OUTD/test_kn_llama_gpu.txt") failed"
grep -E '\| FAIL|FAULT|error' "$OUTD/test_kn_llama_gpu.txt" | head -20
[ "$lrc" = 0 ] || rc=1

say "bench_kernels_gpu d12 B16 T1024"
timeout -k 5 120 "$B/bench_kernels_gpu" --model d12 --B 16 --T 1024 >"$OUTD/bench_kernels_gpu.txt" 2>&1
brc=$?
say "bench_kernels_gpu: exit $brc"
grep -vE '^\|--' "$OUTD/bench_kernels_gpu.txt" | tail -45
[ "$brc" = 0 ] || rc=1
say "done: $([ "$rc" = 0 ] && echo PASS || echo FAIL)"
exit "$rc"
