#!/usr/bin/env bash
# tests/gpu/rehearse.sh - tests/gpu/run.sh's whole flow on a machine WITHOUT a GPU (CI),
# in an environment stripped like the lent GPU machine's (issue 14):
#   - PATH holds only a few system tools (shell utilities, compiler, tar, timeout) and a
#     virtual environment with cmake + ninja from pip: no make, no git, no pkg-config;
#   - the C dependencies packed by tests/gpu/pack_deps.sh (run first, with the full PATH),
#     read through tests/gpu/pkgconfig_shim.py; the commit from the pack (no git);
#   - $OUT a fresh temporary folder; `run.sh --rehearse` replaces each GPU step by its CPU
#     twin or skips it with the reason.
# Checks:
#   1. a clean run builds (cmake -G Ninja) and exits 0;
#   2. at most 7 files land in $OUT;
#   3. the last 3,000 characters of its output hold the headline table and the verdict;
#   4. INJECT_FAIL=train_d12: exit non-zero, the verdict names train_d12;
#   5. a step longer than the budget (a million training steps in 40 s): it is cut and
#      reported TIMEOUT, the later ones NOTRUN, the summary is still printed (headline in
#      the last 3,000 characters), exit non-zero naming it;
#   6. SPEED=1 (the speed table): both shard sets, the five rows as CPU twins (ours; PyTorch
#      skipped with the reason when not installed), the speed table in the headline; the last
#      row's need set past the budget (SPEED_NEED_d36_t1024): NOTRUN, named for a second call,
#      and the only check the verdict names.
# Exit 0 when all pass.  REHEARSE_DIR (build-rehearse), REHEARSE_CUDA=1 (build the .cu
# too: slower), REHEARSE_JOBS (2).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT" || exit 2
RDIR=${REHEARSE_DIR:-$ROOT/build-rehearse}
case "$RDIR" in /*) ;; *) RDIR=$ROOT/$RDIR ;; esac
mkdir -p "$RDIR"
T0=$(date +%s)
fails=0
say() { printf '[rehearse %4ss] %s\n' "$(($(date +%s) - T0))" "$*"; }
ok() { say "ok: $*"; }
bad() { say "FAIL: $*"; fails=$((fails + 1)); }

# ---- cmake + ninja from pip, in a venv (the GPU machine has pip's) ----
VENV=$RDIR/venv
if [ ! -x "$VENV/bin/cmake" ] || [ ! -x "$VENV/bin/ninja" ]; then
    say "venv with cmake + ninja from pip ($VENV)"
    rm -rf "$VENV"
    if ! { python3 -m venv "$VENV" >"$RDIR/venv.log" 2>&1 &&
           "$VENV/bin/python3" -m pip install -q cmake ninja >>"$RDIR/venv.log" 2>&1; }; then
        tail -3 "$RDIR/venv.log"
        # no python3-venv or no PyPI: the system's cmake + ninja, still without make/git/pkg-config
        if command -v cmake >/dev/null && command -v ninja >/dev/null; then
            say "pip unavailable: using the system's cmake and ninja instead"
            rm -rf "$VENV"
            mkdir -p "$VENV/bin"
            for t in cmake ctest ninja python3; do ln -sf "$(command -v "$t")" "$VENV/bin/$t"; done
        else
            say "cannot get cmake + ninja (python3-venv + PyPI, or cmake + ninja-build installed)"
            exit 2
        fi
    fi
fi
"$VENV/bin/cmake" --version | head -1

# ---- the C dependencies, packed like for the device call ----
say "pack_deps.sh -> $RDIR/deps"
PACK_OUT=$RDIR/deps VOCAB_OUT=$RDIR/vocab bash tests/gpu/pack_deps.sh >"$RDIR/pack.log" 2>&1 ||
    { tail -5 "$RDIR/pack.log"; say "pack_deps.sh failed"; exit 2; }

# ---- the stripped PATH ----
SB=$RDIR/sysbin
rm -rf "$SB"
mkdir -p "$SB"
for t in bash sh env cat cp mv rm mkdir rmdir ls ln date find grep egrep sed awk tr cut head tail wc sort uniq \
         timeout tar gzip zstd nproc uname readlink realpath dirname basename chmod printf sleep touch tee xargs \
         expr id stat du mktemp true false test '[' seq od cmp diff \
         gcc cc g++ c++ cpp as ld ld.bfd ld.gold ar ranlib nm objdump objcopy strip; do
    p=$(command -v "$t" 2>/dev/null) && [ -x "$p" ] && ln -sf "$p" "$SB/$t"
done
SPATH=$VENV/bin:$SB
if [ "${REHEARSE_CUDA:-0}" = 1 ]; then
    d=$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")
    SPATH=$SPATH:$d
fi
for t in make git pkg-config; do
    if env -i PATH="$SPATH" bash -c "command -v $t" >/dev/null 2>&1; then bad "$t is on the stripped PATH"; fi
done
ok "stripped PATH: no make, git, pkg-config; cmake $(env -i PATH="$SPATH" cmake --version | head -1 | awk '{print $3}') and ninja from pip"

# run NAME [VAR=value...]: run.sh --rehearse in the stripped environment
run() {
    local name=$1
    shift
    local out=$RDIR/out_$name
    rm -rf "$out"
    mkdir -p "$out"
    say "run.sh --rehearse ($name)"
    env -i HOME="${HOME:-/tmp}" PATH="$SPATH" LANG=C.UTF-8 OUT="$out" BUILD_DIR="$RDIR/build" GPU_DEPS="$RDIR/deps" \
        GPU_VOCAB="$RDIR/vocab" JOBS="${REHEARSE_JOBS:-2}" STEPS=5 REHEARSE_CUDA="${REHEARSE_CUDA:-0}" \
        BUILD_TARGETS="${REHEARSE_TARGETS-mkshards llmtrain test_cuda_msg test_fp16_scale test_kn_ops}" "$@" \
        bash tests/gpu/run.sh --rehearse >"$RDIR/run_$name.log" 2>&1
    RC=$?
    NFILES=$(find "$out" -type f | wc -l)
    TAIL=$(tail -c 3000 "$RDIR/run_$name.log")
    say "$name: exit $RC, $NFILES files in \$OUT, $(wc -c <"$RDIR/run_$name.log") bytes of output"
}
tail_has() { printf '%s' "$TAIL" | grep -qF -- "$1"; }
common() { # the checks every run must pass
    local name=$1
    [ "$NFILES" -le 7 ] && ok "$name: $NFILES files in \$OUT (<= 7)" || bad "$name: $NFILES files in \$OUT (> 7)"
    if tail_has "== HEADLINE (tests/gpu/run.sh) ==" && tail_has "| tokens/s |" && tail_has "RESULT:"; then
        ok "$name: headline table and verdict in the last 3000 characters"
    else
        bad "$name: the last 3000 characters lack the headline table or the verdict"
    fi
    [ -f "$RDIR/out_$name/logs.tar.gz" ] && ok "$name: logs.tar.gz in \$OUT" || bad "$name: no logs.tar.gz in \$OUT"
}

# 1-3: a clean run
run clean
common clean
if [ "$RC" = 0 ] && tail_has "RESULT: PASS"; then ok "clean: exit 0, RESULT: PASS"; else
    bad "clean: exit $RC"; tail -40 "$RDIR/run_clean.log"; fi
grep -q 'check build: PASS' "$RDIR/run_clean.log" && ok "clean: build (cmake -G Ninja, packed deps, no pkg-config)" ||
    bad "clean: build did not pass"
grep -q 'pkg-config shim' "$RDIR/run_clean.log" "$RDIR/out_clean/summary.json" 2>/dev/null &&
    ok "clean: C deps through the pkg-config shim" || bad "clean: the pkg-config shim was not used"

# 4: an injected failed check
run inject INJECT_FAIL=train_d12 SKIP_CTEST=1 SKIP_FP16=1 SKIP_SWEEP=1
common inject
if [ "$RC" != 0 ] && tail_has "RESULT: FAIL" && tail_has "failed checks: train_d12"; then
    ok "inject: exit $RC, the verdict names train_d12"
else
    bad "inject: exit $RC (want non-zero naming train_d12)"
    tail -20 "$RDIR/run_inject.log"
fi

# 5: out of budget after the build: the summary is still printed
# (a training far longer than the budget: the step must be cut and reported, the rest NOTRUN)
run budget TOTAL_BUDGET=40 SUMMARY_RESERVE=8 SKIP_SWEEP=1 SKIP_CTEST=1 STEPS=1000000
common budget
if [ "$RC" != 0 ] && tail_has "| train_d12 | TIMEOUT |" && tail_has "failed checks: train_d12"; then
    ok "budget: exit $RC, out-of-budget steps reported ($(grep -oE '\| (TIMEOUT|NOTRUN) \|' "$RDIR/run_budget.log" | sort | uniq -c | tr -s ' ' | tr '\n' ' '))"
else
    bad "budget: exit $RC, no TIMEOUT/NOTRUN reported"
    tail -20 "$RDIR/run_budget.log"
fi

# 6: the speed table's flow (SPEED=1)
run speed SPEED=1 SPEED_NEED_d36_t1024=100000
[ "$NFILES" -le 7 ] && ok "speed: $NFILES files in \$OUT (<= 7)" || bad "speed: $NFILES files in \$OUT (> 7)"
[ -f "$RDIR/out_speed/logs.tar.gz" ] && ok "speed: logs.tar.gz in \$OUT" || bad "speed: no logs.tar.gz in \$OUT"
npass=$(printf '%s' "$TAIL" | grep -cE '^\| d[0-9]+ T[0-9]+[a-z -]*\(CPU twin: tiny\) \|.*\| PASS \|$')
if [ "$RC" != 0 ] && tail_has "== HEADLINE (tests/gpu/run.sh) ==" && tail_has "| row | rows x T | ours tok/s (MFU) |" &&
    [ "$npass" = 4 ] && tail_has "| speed_d36_t1024 | NOTRUN |" && tail_has "SPEED_ROWS='d36_t1024'" &&
    tail_has "RESULT: FAIL (exit 1) - failed checks: speed_d36_t1024" && grep -q 'check shards_long: PASS' "$RDIR/run_speed.log"; then
    ok "speed: long shards, 4 rows PASS in the headline's table, d36_t1024 NOTRUN (budget) named for a second call and in the verdict"
else
    bad "speed: exit $RC, $npass rows PASS (want 4 and d36_t1024 NOTRUN, named)"
    tail -30 "$RDIR/run_speed.log"
fi

say "rehearsal: $fails failed check(s) in $(($(date +%s) - T0)) s (logs: $RDIR/run_*.log)"
[ "$fails" = 0 ]
