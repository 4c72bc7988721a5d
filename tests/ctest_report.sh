#!/usr/bin/env bash
# ctest_report.sh CTEST-ARGS...: run ctest with the given arguments (they must
# include --test-dir DIR) and then report what did not run: how many tests
# skipped (exit 77) and, for each, the reason its output gave (its last line
# starting with "skip"), so a green run that skipped the golden or parity
# suites says so. Exit status is ctest's. Used by `make test`, `make asan` and
# .ci/run; under CI=true only GPU tests and mks_allow_skip'd ones can skip
# (tests/CMakeLists.txt), everything else that exits 77 fails.
set -uo pipefail
dir=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
    [ "${args[i]}" = "--test-dir" ] && dir=${args[i + 1]:-}
done
[ -n "$dir" ] || { echo "ctest_report.sh: pass --test-dir DIR" >&2; exit 64; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
ctest "$@" 2>&1 | tee "$out"
rc=${PIPESTATUS[0]}
# ctest lists them as "  NN - name (Skipped)" under "The following tests did not run:"
mapfile -t skipped < <(sed -n 's/^[[:space:]]*[0-9][0-9]* - \(.*\) (Skipped)$/\1/p' "$out")
log="$dir/Testing/Temporary/LastTest.log"
echo
echo "== skipped: ${#skipped[@]} test(s)"
for t in "${skipped[@]}"; do
    why=""
    if [ -f "$log" ]; then
        # the test's output sits between '"NAME" start time' and '<end of output>'
        why=$(awk -v t="\"$t\" start time" '
            index($0, t) == 1 { on = 1; next }
            on && /^<end of output>/ { exit }
            on && tolower($0) ~ /^skip/ { last = $0 }
            END { print last }' "$log")
    fi
    printf '   %-32s %s\n' "$t" "${why:-(no reason printed)}"
done
exit "$rc"
