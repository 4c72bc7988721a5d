#!/usr/bin/env bash
# check.sh LLMTRAIN [--fma] - the golden llmtrain runs (runs.sh) on the
# committed inputs must reproduce tests/data/golden_train/expected.txt
# exactly: per-step loss / lr / grad_norm / val_loss as logged, the final
# checkpoint's sha256 (bit-exact parameters and AdamW moments), the sample,
# and the resumed run equal to the uninterrupted one. Exit 0 same, 1
# different.
#
# The record is made with the matmul's exact numerics (rounded multiply,
# rounded add: MKS_MATMUL_ISA=portable or avx512, the same bits on any CPU);
# ctest runs it that way. --fma checks the default kernels' FMA numerics,
# which differ in the last bits: the runs with the AVX-512 FMA kernel and
# with the AVX2 FMA one (each where the CPU has it) must equal each other
# bit for bit (summary and checkpoints), their resumed run the uninterrupted
# one, and every logged value must be within FMA_RTOL of the record (the
# checkpoint digests and the sample's ids are not compared with it). Exit 77
# when the CPU has no FMA kernel.
set -u
LLM=$1
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
D=$ROOT/tests/data/golden_train
[ -x "$LLM" ] || { echo "skip: no llmtrain at $LLM"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
(cd "$D" && sha256sum --quiet -c inputs.sha256) || { echo "FAIL committed inputs changed (inputs.sha256)"; exit 1; }
cp -r "$D/inputs" "$T/inputs"

check_resume() { # summary
    if diff <(grep '^resume_ref ' "$1" | sed 's/^resume_ref //') \
            <(grep -E '^resume (step=|ckpt)' "$1" | sed 's/^resume //'); then
        echo "ok   resume = uninterrupted run (every step, checkpoint digest)"
    else
        echo "FAIL resumed run differs from the uninterrupted one"
        fail=1
    fi
}

if [ "${2:-}" != "--fma" ]; then
    bash "$ROOT/tests/golden_train/runs.sh" "$LLM" "$T/inputs" "$T/out" || fail=1
    if diff -u "$D/expected.txt" "$T/out/summary.txt" >"$T/diff"; then
        echo "ok   $(wc -l <"$D/expected.txt") golden lines identical (plain, docmask, accum, accum_docmask, resume)"
    else
        echo "FAIL golden llmtrain runs differ from tests/data/golden_train/expected.txt:"
        head -40 "$T/diff"
        fail=1
    fi
    # the resumed run (stopped, killed mid-step, resumed twice) = the uninterrupted one
    check_resume "$T/out/summary.txt"
    exit $fail
fi

# --fma: the kernels of the FMA numerics this CPU has
FMA_RTOL=${FMA_RTOL:-1e-5} # measured worst 3.5e-7 (tiny GPT-2, 8-10 steps)
ran=()
for isa in avx512-fma avx2-fma; do
    grep -qw fma /proc/cpuinfo || continue
    case $isa in avx512-fma) grep -qw avx512f /proc/cpuinfo || continue ;; avx2-fma) grep -qw avx2 /proc/cpuinfo || continue ;; esac
    MKS_MATMUL_ISA=$isa bash "$ROOT/tests/golden_train/runs.sh" "$LLM" "$T/inputs" "$T/$isa" || fail=1
    check_resume "$T/$isa/summary.txt"
    ran+=("$isa")
done
[ ${#ran[@]} -gt 0 ] || { echo "skip: no FMA matmul kernel on this CPU"; exit 77; }
if [ ${#ran[@]} -eq 2 ]; then
    if diff -u "$T/avx512-fma/summary.txt" "$T/avx2-fma/summary.txt" >"$T/diff"; then
        echo "ok   avx512-fma = avx2-fma: $(wc -l <"$T/avx2-fma/summary.txt") lines identical (checkpoint digests included)"
    else
        echo "FAIL the two FMA kernels' runs differ:"
        head -20 "$T/diff"
        fail=1
    fi
fi
# every logged number within FMA_RTOL of the record; the same lines, keys and
# integers; checkpoint digests and sample ids only exist on both sides
python3 - "$D/expected.txt" "$T/${ran[0]}/summary.txt" "$FMA_RTOL" <<'PY' || fail=1
import sys
exp, got, rtol = open(sys.argv[1]).read().splitlines(), open(sys.argv[2]).read().splitlines(), float(sys.argv[3])
if len(exp) != len(got):
    sys.exit(print("FAIL %d summary lines, the record has %d" % (len(got), len(exp))) or 1)
worst, n, bad = 0.0, 0, []
for e, g in zip(exp, got):
    ew, gw = e.split(), g.split()
    if " ckpt sha256=" in e or " sample " in e:
        if ew[:2] != gw[:2]:
            bad.append((e, g))
        continue
    if len(ew) != len(gw):
        bad.append((e, g))
        continue
    for a, b in zip(ew, gw):
        ka, _, va = a.partition("=")
        kb, _, vb = b.partition("=")
        if ka != kb:
            bad.append((e, g))
            break
        try:
            x, y = float(va), float(vb)
        except ValueError:
            if va != vb:
                bad.append((e, g))
            continue
        rel = abs(x - y) / max(abs(x), abs(y), 1e-30)
        n += 1
        worst = max(worst, rel)
        if rel > rtol:
            bad.append((e, g))
for e, g in bad[:10]:
    print("FAIL record: %s\n     fma:    %s" % (e, g))
print("%s %d logged values within %g of the record (worst %.2e)" % ("FAIL" if bad else "ok  ", n, rtol, worst))
sys.exit(1 if bad else 0)
PY
exit $fail
