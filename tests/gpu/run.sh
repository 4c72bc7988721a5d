#!/usr/bin/env bash
# tests/gpu/run.sh - the one prepared GPU check of issue 7 (H200; well under 8 minutes).
#
#   bash tests/gpu/run.sh              on the lent GPU machine (from the repository root)
#   bash tests/gpu/run.sh --dry-run    anywhere: everything up to the first GPU use, then stop
#
# Steps: (1) tools and paths; (2) build for sm_90 (cmake + make -j16) in build-gpu/;
# (3) shards from samples/ built here (../shared does not travel); (4) `llmtrain --plan` for
# d12 (CPU only); --- first GPU use below this line ---
# (5) nvidia-smi; (6) ctest -L gpu; (7) `llmtrain --device cuda` d12, T=1024, bf16, a bounded
# number of steps; (8) tools/bench/nanogpt_torch.py at the same batch; (9) a sweep of configs
# near the memory limit (each: refused at plan time / trained / OOM / failed);
# (10) ONE table, printed last and appended to docs/gpu-results.md with the date and commit.
#
# Before the device call, here: `bash tests/gpu/pack_deps.sh` (tmp/gpu-deps: the C
# dependencies as static libraries, in case the GPU image lacks them; tmp/vocab: GPT-2's
# vocabulary), then carry ["tmp/gpu-deps", "tmp/vocab"] (docs/gpu-notes.md).
# Vocabulary: GPT-2's when one is found (GPT2_VOCAB=..., tmp/vocab/gpt2.tiktoken, or
# ../shared/vocab); otherwise a BPE vocabulary trained on samples/ (then the model is smaller
# than 124M: the table says so). FORCE_FALLBACK=1 tries the CUDA-only build.
#
# Environment knobs: STEPS (d12 timed steps, 30), BATCH (rows per micro-batch, 32),
# SEQ (1024), JOBS (16; nproc in a dry run), MEM_BUDGET (plan of step 4, 139GiB), BUILD_DIR (build-gpu), SWEEP_SECONDS (budget for the sweep, 90), TOTAL_BUDGET (510 s: later steps skip past it),
# SKIP_TORCH=1, SKIP_SWEEP=1, SKIP_CTEST=1. Logs and JSON go to $OUT (the device tool's folder)
# when set, else to $BUILD_DIR/gpu-run.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2

DRY=0
for a in "$@"; do
    case "$a" in
        --dry-run) DRY=1 ;;
        -h | --help) awk 'NR > 1 && /^#/ { print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "run.sh: unknown argument '$a' (try --help)" >&2; exit 64 ;;
    esac
done

STEPS=${STEPS:-30}
BATCH=${BATCH:-32}
SEQ=${SEQ:-1024}
if [ "$DRY" = 1 ]; then JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}; else JOBS=${JOBS:-16}; fi
BUILD_DIR=${BUILD_DIR:-build-gpu}
SWEEP_SECONDS=${SWEEP_SECONDS:-90}
TOTAL_BUDGET=${TOTAL_BUDGET:-510} # seconds: later steps are skipped (and say so) past this
LOGDIR=${OUT:-$ROOT/$BUILD_DIR/gpu-run}
WORK=$ROOT/$BUILD_DIR/gpu-work
PY=${PYTHON:-python3}
T_START=$(date +%s)
mkdir -p "$LOGDIR" "$WORK"

say() { printf '[run.sh %4ss] %s\n' "$(($(date +%s) - T_START))" "$*"; }
die() { say "FATAL: $*"; exit 2; }
have() { command -v "$1" >/dev/null 2>&1; }
# Result rows for the final table: "section|key|value".
RESULTS=$LOGDIR/results.txt
: >"$RESULTS"
res() { printf '%s|%s|%s\n' "$1" "$2" "$3" >>"$RESULTS"; }

# ---------------------------------------------------------------------------------------------
say "1. tools and paths (dry run: $DRY)"
missing=""
for t in cmake make "$PY" git awk sed; do have "$t" || missing="$missing $t"; done
have nvcc || [ -x /usr/local/cuda/bin/nvcc ] || missing="$missing nvcc"
[ -n "$missing" ] && die "missing tools:$missing"
have nvcc || export PATH=/usr/local/cuda/bin:$PATH
for f in samples/tiny.jsonl tools/bench/nanogpt_torch.py tests/gpu/summarize.py CMakeLists.txt; do
    [ -f "$f" ] || die "missing file $f"
done
say "nvcc: $(nvcc --version | tail -1)"
PYDEPS=$("$PY" - <<'EOF'
import importlib
out = []
for m in ("numpy", "torch", "triton"):
    try:
        mod = importlib.import_module(m)
        out.append(f"{m}={getattr(mod, '__version__', '?')}")
    except Exception as e:
        out.append(f"{m}=MISSING({type(e).__name__})")
print(" ".join(out))
EOF
)
say "python deps: $PYDEPS"
case "$PYDEPS" in *numpy=MISSING*) die "numpy is required (tests/gpu/summarize.py does not need it, the reader does)" ;; esac
TORCH_OK=1
case "$PYDEPS" in *torch=MISSING*) TORCH_OK=0; say "torch missing: the PyTorch baseline will be skipped" ;; esac
# The project's C dependencies: the system's, else the static ones packed here by
# tests/gpu/pack_deps.sh (carried as tmp/gpu-deps), else a CUDA-only fallback build
# (kernels, their tests and timings; no mkshards, no trainer).
PC_MODS=(libutf8proc libzstd jansson libxxhash nettle)
DEPS=system
if [ -n "${FORCE_FALLBACK:-}" ]; then
    DEPS=none
elif ! have pkg-config; then
    DEPS=none
elif ! pkg-config --exists "${PC_MODS[@]}"; then
    if [ -d "$ROOT/tmp/gpu-deps/lib/pkgconfig" ]; then
        export PKG_CONFIG_PATH="$ROOT/tmp/gpu-deps/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
        if pkg-config --exists "${PC_MODS[@]}"; then DEPS=packed; else DEPS=none; fi
    else
        DEPS=none
    fi
fi
say "C dependencies: $DEPS$([ "$DEPS" = none ] && echo ' -> CUDA-only fallback build (run tests/gpu/pack_deps.sh here and carry tmp/gpu-deps to avoid it)')"
res build deps "$DEPS"
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
DIRTY=$(git status --porcelain --untracked-files=no 2>/dev/null | head -1)
[ -n "$DIRTY" ] && COMMIT="$COMMIT+dirty"
res meta commit "$COMMIT"
res meta date "$(date -u '+%Y-%m-%d %H:%M UTC')"

# ---------------------------------------------------------------------------------------------
say "2. build for sm_90 in $BUILD_DIR (-j$JOBS)"
fallback_build() {
    # kernels + their C references + the GPU kernel test and bench, with gcc/nvcc only
    local d=$BUILD_DIR/fallback
    mkdir -p "$d" "$BUILD_DIR/tests"
    local nv=(nvcc -O3 -std=c++17 "-gencode=arch=compute_90,code=sm_90" "-Xcompiler=-Wall,-Wextra" -Ikernels)
    for f in kernels/*_ref.c; do
        gcc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unknown-pragmas -Ikernels -c "$f" \
            -o "$d/$(basename "$f" .c).o" || return 1
    done
    local pids=() f p
    for f in kernels/*.cu; do
        "${nv[@]}" -c "$f" -o "$d/$(basename "$f" .cu).o" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || return 1; done
    local objs=("$d"/*.o)
    "${nv[@]}" tests/test_kernels_gpu.cu "${objs[@]}" -lcublasLt -lm -o "$BUILD_DIR/tests/test_kernels_gpu" || return 1
    "${nv[@]}" tests/bench_kernels_gpu.cu "${objs[@]}" -lcublasLt -lm -o "$BUILD_DIR/tests/bench_kernels_gpu" || return 1
}
FALLBACK=0
if [ "$DEPS" = none ]; then
    FALLBACK=1
    if ! fallback_build >"$LOGDIR/build.log" 2>&1; then
        grep -E 'error' "$LOGDIR/build.log" | head -30; die "fallback build failed (log: $LOGDIR/build.log)"
    fi
    nwarn=$(grep -c -i 'warning' "$LOGDIR/build.log" || true)
    say "fallback build ok ($nwarn warning lines): kernels only"
    res build warnings "$nwarn (fallback build)"
elif ! cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DMKS_ENABLE_CUDA=ON \
        -DCMAKE_CUDA_ARCHITECTURES=90 >"$LOGDIR/cmake.log" 2>&1; then
    tail -30 "$LOGDIR/cmake.log"; die "cmake configure failed (log: $LOGDIR/cmake.log)"
fi
if [ "$FALLBACK" = 0 ]; then
    if ! cmake --build "$BUILD_DIR" -j"$JOBS" >"$LOGDIR/build.log" 2>&1; then
        grep -E 'error|Error' "$LOGDIR/build.log" | head -30; die "build failed (log: $LOGDIR/build.log)"
    fi
    nwarn=$(grep -c -i 'warning' "$LOGDIR/build.log" || true)
    say "build ok ($nwarn warning lines)"
    res build warnings "$nwarn"
fi
MKS=$BUILD_DIR/tools/mkshards
LLMTRAIN=""
for c in "$BUILD_DIR/tools/llmtrain/llmtrain" "$BUILD_DIR/train/llmtrain" "$BUILD_DIR/tools/llmtrain" \
         "$BUILD_DIR/llmtrain"; do
    [ -f "$c" ] && [ -x "$c" ] && LLMTRAIN=$c && break
done
[ -x "$MKS" ] || [ "$FALLBACK" = 1 ] || die "no $MKS after the build"
if [ "$FALLBACK" = 1 ]; then
    res ours status "fallback build: no trainer"
elif [ -z "$LLMTRAIN" ]; then
    say "llmtrain: NOT BUILT (no train/llmtrain target yet): the trainer rows will say so"
    res ours status "llmtrain not built"
elif ! "$LLMTRAIN" --help 2>&1 | grep -q -- 'cuda'; then
    say "llmtrain: built, but its --help names no cuda device: CUDA path missing"
    res ours status "llmtrain has no --device cuda"
    LLMTRAIN_NOCUDA=1
fi

# ---------------------------------------------------------------------------------------------
say "3. shards from samples/"
VOCAB=""
for c in "${GPT2_VOCAB:-}" tmp/vocab/gpt2.tiktoken ../shared/vocab/gpt2.tiktoken; do
    [ -n "$c" ] && [ -f "$c" ] && VOCAB=$c && break
done
if [ "$FALLBACK" = 1 ]; then
    VOCAB=none
    say "fallback build: no mkshards, no shards (torch uses random tokens)"
    res data vocab "gpt2 size, random tokens (fallback build)"
elif [ -n "$VOCAB" ]; then
    say "vocabulary: GPT-2 ($VOCAB)"
    res data vocab "gpt2 ($VOCAB)"
else
    VOCAB=$WORK/samples.tiktoken
    say "no GPT-2 vocabulary here: training one on samples/ (model will be smaller than 124M)"
    if ! "$MKS" tokenizer train -q -n 50257 -p gpt2 -s '<|endoftext|>' -o "$VOCAB" samples/tiny.jsonl \
            >"$LOGDIR/tokenizer.log" 2>&1; then
        tail -5 "$LOGDIR/tokenizer.log"; die "mkshards tokenizer train failed"
    fi
    res data vocab "trained on samples/ ($(wc -l <"$VOCAB") ranks; not GPT-2's)"
fi
SHARDS=$WORK/shards
SHARDS_OK=0
rm -rf "$SHARDS"
if [ "$FALLBACK" = 1 ]; then
    res data shards "none (fallback build)"
elif "$MKS" build --help 2>&1 | grep -qi 'not implemented'; then
    say "mkshards build: not implemented yet -> no shards; llmtrain cannot run, torch uses random tokens"
    res data shards "mkshards build not implemented"
elif "$MKS" build --tokenizer "$VOCAB" --seq-len "$SEQ" --out "$SHARDS" samples/tiny.jsonl \
        >"$LOGDIR/shards.log" 2>&1; then
    SHARDS_OK=1
    say "shards: $(find "$SHARDS" -type f | wc -l) files in $SHARDS"
    res data shards "samples/tiny.jsonl, seq-len $SEQ"
else
    tail -5 "$LOGDIR/shards.log"
    say "mkshards build failed (log: $LOGDIR/shards.log)"
    res data shards "mkshards build FAILED"
fi
# longer rows for the sweep (tiny data: a few rows each; the loader wraps epochs)
shards_for() { if [ "$1" = "$SEQ" ]; then echo "$SHARDS"; else echo "$WORK/shards_T$1"; fi; }
if [ "$SHARDS_OK" = 1 ]; then
    for s in 1024 2048 4096 8192; do
        [ "$s" = "$SEQ" ] && continue
        rm -rf "$WORK/shards_T$s"
        "$MKS" build --tokenizer "$VOCAB" --seq-len "$s" --out "$WORK/shards_T$s" samples/tiny.jsonl \
            >>"$LOGDIR/shards.log" 2>&1 || say "mkshards build --seq-len $s failed"
    done
fi
# vocabulary size: the manifest's if it says, else the rank file's line count
VOCAB_N=$("$PY" - "$SHARDS" "$VOCAB" <<'EOF'
import glob, json, os, sys
shards, vocab = sys.argv[1], sys.argv[2]
for m in sorted(glob.glob(os.path.join(shards, "*.json"))):
    try:
        j = json.load(open(m))
    except Exception:
        continue
    def find(o):
        if isinstance(o, dict):
            for k, v in o.items():
                if k in ("vocab_size", "vocab") and isinstance(v, int):
                    return v
                r = find(v)
                if r:
                    return r
        return None
    v = find(j)
    if v:
        print(v); sys.exit(0)
if vocab == "none":
    print(50257); sys.exit(0)
n = sum(1 for _ in open(vocab))
print(50257 if n == 50256 else n + 1)  # gpt2.tiktoken: 50256 ranks + <|endoftext|>
EOF
)
say "vocabulary size: $VOCAB_N"
res data vocab_size "$VOCAB_N"

# ---------------------------------------------------------------------------------------------
say "4. plan for d12 (no GPU)"
TOKB=$((BATCH * SEQ))
TRAIN_ARGS=(--data "$SHARDS" --model d12 --seq-len "$SEQ" --token-budget "$TOKB" --batch-tokens "$TOKB"
            --precision bf16)
CAN_TRAIN=0
if [ -n "$LLMTRAIN" ] && [ "$SHARDS_OK" = 1 ]; then
    "$LLMTRAIN" --plan "${TRAIN_ARGS[@]}" --device cuda --mem-budget "${MEM_BUDGET:-139GiB}" >"$LOGDIR/plan_d12.txt" 2>&1
    prc=$?
    say "llmtrain --plan exit $prc"
    sed -n '1,40p' "$LOGDIR/plan_d12.txt"
    [ "$prc" = 0 ] && [ -z "${LLMTRAIN_NOCUDA:-}" ] && CAN_TRAIN=1
    [ "$prc" != 0 ] && res ours status "plan exit $prc (see plan_d12.txt)"
fi

say "4b. torch script check (CPU, tiny, 2 steps)"
if [ "$TORCH_OK" = 1 ]; then
    if "$PY" tools/bench/nanogpt_torch.py --check >"$LOGDIR/torch_check.json" 2>"$LOGDIR/torch_check.err"; then
        say "torch check: $(cat "$LOGDIR/torch_check.json")"
    else
        tail -5 "$LOGDIR/torch_check.err"; say "torch check FAILED"; TORCH_OK=0
        res torch status "CPU check failed"
    fi
else
    "$PY" -m py_compile tools/bench/nanogpt_torch.py && say "torch missing; script compiles"
    res torch status "torch not installed"
fi

if [ "$DRY" = 1 ]; then
    say "dry run: stopping before the first GPU use. Results so far:"
    "$PY" tests/gpu/summarize.py --results "$RESULTS" --logdir "$LOGDIR" --dry-run
    exit 0
fi

# ===================================== GPU from here on ========================================
say "5. the device"
if ! have nvidia-smi || ! nvidia-smi >"$LOGDIR/nvidia-smi.txt" 2>&1; then
    die "nvidia-smi failed: no GPU here (use --dry-run on machines without one)"
fi
GPU=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1)
DEV_MIB=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1 | tr -dc '0-9')
DEV_BYTES=$((${DEV_MIB:-81920} * 1048576))
say "gpu: $GPU"
res meta gpu "$GPU"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >>"$LOGDIR/nvidia-smi.txt" 2>&1

# ---------------------------------------------------------------------------------------------
if [ -z "${SKIP_CTEST:-}" ]; then
    say "6. gpu-labelled tests"
    if [ "$FALLBACK" = 1 ]; then
        timeout 300 "$BUILD_DIR/tests/test_kernels_gpu" >"$LOGDIR/ctest_gpu.log" 2>&1
        crc=$?
        echo "test_kernels_gpu exit $crc (fallback build: run directly; $([ $crc = 0 ] && echo '100% tests passed' || echo 'tests failed'))" \
            >>"$LOGDIR/ctest_gpu.log"
    else
        ctest --test-dir "$BUILD_DIR" -L gpu -V --timeout 120 >"$LOGDIR/ctest_gpu.log" 2>&1
        crc=$?
    fi
    grep -E 'tests passed|tests failed|Test +#' "$LOGDIR/ctest_gpu.log" | tail -20
    # the kernel table (op/dtype/err/pass) printed by test_kernels_gpu
    sed -E 's/^[0-9]+: //' "$LOGDIR/ctest_gpu.log" | grep -E '^\|' >"$LOGDIR/kernel_table.txt" || true
    grep -E 'FAIL' "$LOGDIR/kernel_table.txt" | head -20
    res ctest gpu "$(grep -E 'tests passed|tests failed|checks passed' "$LOGDIR/ctest_gpu.log" | tail -1 | sed 's/^ *//') (exit $crc)"
fi

# ---------------------------------------------------------------------------------------------
say "6b. ceilings (torch: device copy, 8192^3 bf16 matmul) and kernel timings at d12 shapes"
if [ "$TORCH_OK" = 1 ]; then
    timeout 60 "$PY" - >"$LOGDIR/ceilings.txt" 2>&1 <<'EOF'
import torch
d = torch.device("cuda")
def t(f, n=10):
    for _ in range(3): f()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(n):
        s.record(); f(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e) / 1e3)
    return sorted(ts)[len(ts) // 2]
x = torch.rand(2**30, device=d, dtype=torch.float32); y = torch.empty_like(x)
bw = 2 * x.numel() * 4 / t(lambda: y.copy_(x))
a = torch.randn(8192, 8192, device=d, dtype=torch.bfloat16); b = torch.randn_like(a)
tf = 2 * 8192**3 / t(lambda: a @ b)
print(f"CEILINGS copy_GBps={bw / 1e9:.0f} bf16_matmul_TFLOPs={tf / 1e12:.0f}")
EOF
    tail -1 "$LOGDIR/ceilings.txt"
    res meta ceilings "$(grep CEILINGS "$LOGDIR/ceilings.txt" | sed 's/CEILINGS //')"
fi
if [ -x "$BUILD_DIR/tests/bench_kernels_gpu" ]; then
    timeout 120 "$BUILD_DIR/tests/bench_kernels_gpu" --model d12 --B 16 --T "$SEQ" >"$LOGDIR/bench_kernels.txt" 2>&1
    say "bench_kernels_gpu exit $?"
    tail -5 "$LOGDIR/bench_kernels.txt"
    res kernels projection "$(grep '^PROJECTION' "$LOGDIR/bench_kernels.txt" | sed 's/PROJECTION //')"
fi

# ---------------------------------------------------------------------------------------------
say "7. llmtrain --device cuda d12 T=$SEQ bf16, batch $BATCH, $STEPS steps"
if [ "$CAN_TRAIN" = 1 ]; then
    timeout 240 "$LLMTRAIN" "${TRAIN_ARGS[@]}" --device cuda --mem-budget "$DEV_BYTES" --steps "$STEPS" --seed 1 \
        --log "$LOGDIR/ours_d12.jsonl" >"$LOGDIR/ours_d12.txt" 2>&1
    orc=$?
    tail -8 "$LOGDIR/ours_d12.txt"
    res ours exit "$orc"
    grep -qi 'out of memory' "$LOGDIR/ours_d12.txt" && res ours oom 1
    if [ "$orc" = 2 ] && grep -qi 'no CUDA backend\|--device cuda' "$LOGDIR/ours_d12.txt"; then
        NO_CUDA_BACKEND=1
        say "llmtrain has no CUDA backend in this build: the sweep will only plan"
    fi
    if [ "$orc" != 0 ]; then
        # exit 2 with a device message: this build's llmtrain has no CUDA backend (or sees no GPU);
        # any other failure of the wired trainer: measure the GPU model with bench_train_gpu too
        LLMTRAIN_CUDA_FAILED=1
        res ours status "llmtrain exit $orc: $(grep -v '^ *$' "$LOGDIR/ours_d12.txt" | tail -1 | cut -c1-120 | tr '|' '/')"
    fi
else
    say "llmtrain d12 on cuda: SKIPPED (no llmtrain, no cuda path, no shards or plan refused)"
fi
BTG=$BUILD_DIR/tests/bench_train_gpu
if { [ "$CAN_TRAIN" = 0 ] || [ -n "${NO_CUDA_BACKEND:-}" ] || [ -n "${LLMTRAIN_CUDA_FAILED:-}" ]; } &&
   [ -x "$BTG" ] && [ "$SHARDS_OK" = 1 ]; then
    say "7b. the GPU model without llmtrain: bench_train_gpu d12 T=$SEQ bf16, batch $BATCH, $STEPS steps"
    [ -f "$LOGDIR/ours_d12.txt" ] && mv "$LOGDIR/ours_d12.txt" "$LOGDIR/llmtrain_d12.txt"
    timeout 240 "$BTG" --data "$SHARDS" --model d12 --seq-len "$SEQ" --batch "$BATCH" --steps "$STEPS" \
        --precision bf16 --log "$LOGDIR/ours_d12.jsonl" >"$LOGDIR/ours_d12.txt" 2>&1
    brc=$?
    tail -4 "$LOGDIR/ours_d12.txt"
    res ours source "bench_train_gpu (tr_cuda_model + loader + arena; llmtrain --device cuda failed or has no CUDA path), exit $brc"
    grep -qi 'out of memory' "$LOGDIR/ours_d12.txt" && res ours oom 1
    if grep -q 'attention_backward (tc).*PASS' "$LOGDIR/kernel_table.txt" 2>/dev/null &&
       grep -q 'attention_forward (tc).*PASS' "$LOGDIR/kernel_table.txt" 2>/dev/null; then
        say "7c. the same with the tensor-core attention (its kernel tests passed)"
        MKS_CUDA_ATTENTION=tc timeout 240 "$BTG" --data "$SHARDS" --model d12 --seq-len "$SEQ" --batch "$BATCH" \
            --steps "$STEPS" --precision bf16 --log "$LOGDIR/ours_d12_tc.jsonl" >"$LOGDIR/ours_d12_tc.txt" 2>&1
        say "tc run exit $?"
        tail -2 "$LOGDIR/ours_d12_tc.txt"
        res ours tc_tokens_per_s "$("$PY" -c 'import json,statistics,sys
r=[json.loads(l) for l in open(sys.argv[1]) if "tok_per_s" in l]
r=r[len(r)//4:]
print("%.0f" % statistics.median([x["tok_per_s"] for x in r]) if r else "n/a")' "$LOGDIR/ours_d12_tc.jsonl" 2>/dev/null)"
    fi
fi

# ---------------------------------------------------------------------------------------------
elapsed() { echo $(($(date +%s) - T_START)); }
if [ "$(elapsed)" -gt $((TOTAL_BUDGET - 150)) ] && [ -z "${SKIP_TORCH:-}" ]; then
    say "8. PyTorch baseline SKIPPED: $(elapsed) s used of the $TOTAL_BUDGET s budget"
    res torch status "skipped (time budget)"
    SKIP_TORCH=1
fi
if [ -z "${SKIP_TORCH:-}" ] && [ "$TORCH_OK" = 1 ]; then
    say "8. PyTorch nanoGPT-style d12, same batch"
    DATA_ARG=()
    [ "$SHARDS_OK" = 1 ] && DATA_ARG=(--data "$SHARDS")
    timeout 300 "$PY" tools/bench/nanogpt_torch.py --model d12 --seq-len "$SEQ" --batch "$BATCH" \
        --steps "$STEPS" --vocab-size "$VOCAB_N" "${DATA_ARG[@]}" >"$LOGDIR/torch_d12.json" 2>"$LOGDIR/torch_d12.err"
    trc=$?
    tail -3 "$LOGDIR/torch_d12.err"
    say "torch: exit $trc $(tail -1 "$LOGDIR/torch_d12.json")"
    res torch exit "$trc"
fi

# ---------------------------------------------------------------------------------------------
if [ -z "${SKIP_SWEEP:-}" ] && [ -n "$LLMTRAIN" ] && [ "$SHARDS_OK" = 1 ] && [ -z "${LLMTRAIN_NOCUDA:-}" ]; then
    say "9. sweep near the memory limit (budget ${SWEEP_SECONDS}s)"
    SWEEP_END=$(($(date +%s) + SWEEP_SECONDS))
    [ "$SWEEP_END" -gt $((T_START + TOTAL_BUDGET)) ] && SWEEP_END=$((T_START + TOTAL_BUDGET))
    # model seq precision token-budget mem-budget: the token budget asks for far more rows than fit,
    # so the planner must pick the largest micro-batch under the device's memory (or refuse).
    while read -r m s p tb mb; do
        [ -z "$m" ] && continue
        tag="$m/T$s/$p/tok$tb/mem$mb"
        if [ "$(date +%s)" -ge "$SWEEP_END" ]; then res sweep "$tag" "skipped (time)"; continue; fi
        tmo=$((SWEEP_END - $(date +%s) + 20))
        [ "$tmo" -gt 120 ] && tmo=120
        args=(--data "$(shards_for "$s")" --model "$m" --seq-len "$s" --precision "$p" --token-budget "$tb"
              --batch-tokens "$tb" --device cuda)
        mbarg=(--mem-budget "$DEV_BYTES")
        [ "$mb" != dev ] && mbarg=(--mem-budget "$mb")
        "$LLMTRAIN" --plan "${args[@]}" "${mbarg[@]}" >"$LOGDIR/sweep_plan_${tag//\//_}.txt" 2>&1
        prc=$?
        if [ "$prc" = 3 ]; then res sweep "$tag" "refused at plan time"; continue; fi
        if [ "$prc" != 0 ]; then res sweep "$tag" "plan error (exit $prc)"; continue; fi
        if [ -n "${NO_CUDA_BACKEND:-}" ]; then
            # llmtrain cannot train on the GPU yet: train the planned micro-batch with the GPU model
            rows=$("$LLMTRAIN" --plan "${args[@]}" "${mbarg[@]}" --json 2>/dev/null |
                   "$PY" -c 'import json,sys; print(json.load(sys.stdin)["micro_rows"])' 2>/dev/null)
            if [ -z "$rows" ] || [ ! -x "$BTG" ]; then
                res sweep "$tag" "plan fits; not trained (no CUDA backend)"; continue
            fi
            timeout "$tmo" "$BTG" --data "$(shards_for "$s")" --model "$m" --seq-len "$s" --precision "$p" \
                --batch "$rows" --steps 2 --fast-init >"$LOGDIR/sweep_${tag//\//_}.txt" 2>&1
            trc=$?
            if [ "$trc" = 124 ]; then res sweep "$tag" "timed out (${tmo}s; bench_train_gpu B=$rows)"
            elif grep -qi 'out of memory' "$LOGDIR/sweep_${tag//\//_}.txt"; then res sweep "$tag" "OOM (bench_train_gpu, B=$rows)"
            elif [ "$trc" = 0 ]; then res sweep "$tag" "trained (bench_train_gpu, B=$rows)"
            else res sweep "$tag" "failed (bench_train_gpu B=$rows, exit $trc)"; fi
            continue
        fi
        timeout "$tmo" "$LLMTRAIN" "${args[@]}" "${mbarg[@]}" --steps 3 \
            >"$LOGDIR/sweep_${tag//\//_}.txt" 2>&1
        trc=$?
        if grep -qi 'out of memory' "$LOGDIR/sweep_${tag//\//_}.txt"; then res sweep "$tag" "OOM"
        elif [ "$trc" = 0 ]; then res sweep "$tag" "trained"
        elif [ "$trc" = 3 ]; then res sweep "$tag" "refused at start (exit 3)"
        else res sweep "$tag" "failed (exit $trc)"; fi
    done <<'EOF'
d12 1024 bf16 1048576 dev
d24 1024 bf16 1048576 dev
d36 2048 bf16 1048576 dev
d48 1024 bf16 1048576 dev
d48 4096 fp32 1048576 dev
d12 8192 bf16 1048576 dev
d48 1024 bf16 8192 4GiB
d24 1024 fp32 1048576 24GiB
EOF
fi

# ---------------------------------------------------------------------------------------------
say "10. summary"
"$PY" tests/gpu/summarize.py --results "$RESULTS" --logdir "$LOGDIR" --seq "$SEQ" --batch "$BATCH" \
    --append docs/gpu-results.md
# the device machine's working tree does not come back: $OUT does
[ -f docs/gpu-results.md ] && [ "$LOGDIR" != "$ROOT/docs" ] && cp docs/gpu-results.md "$LOGDIR/gpu-results.md"
say "done in $(($(date +%s) - T_START)) s; logs in $LOGDIR (gpu-results.md there: copy it over docs/gpu-results.md)"
