#!/usr/bin/env bash
# check.sh LLMTRAIN - the golden llmtrain runs (runs.sh) on the committed
# inputs must reproduce tests/data/golden_train/expected.txt exactly: per-step
# loss / lr / grad_norm / val_loss as logged, the final checkpoint's sha256
# (bit-exact parameters and AdamW moments), the sample, and the resumed run
# equal to the uninterrupted one. Exit 0 same, 1 different.
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
bash "$ROOT/tests/golden_train/runs.sh" "$LLM" "$T/inputs" "$T/out" || fail=1
if diff -u "$D/expected.txt" "$T/out/summary.txt" >"$T/diff"; then
    echo "ok   $(wc -l <"$D/expected.txt") golden lines identical (plain, docmask, accum, accum_docmask, resume)"
else
    echo "FAIL golden llmtrain runs differ from tests/data/golden_train/expected.txt:"
    head -40 "$T/diff"
    fail=1
fi
# the resumed run (stopped, killed mid-step, resumed twice) = the uninterrupted one
if diff <(grep '^resume_ref ' "$T/out/summary.txt" | sed 's/^resume_ref //') \
        <(grep -E '^resume (step=|ckpt)' "$T/out/summary.txt" | sed 's/^resume //'); then
    echo "ok   resume = uninterrupted run (every step, checkpoint digest)"
else
    echo "FAIL resumed run differs from the uninterrupted one"
    fail=1
fi
exit $fail
