#!/usr/bin/env bash
# dist_kill.sh MPIEXEC TEST_COMM - a rank that dies (SIGKILL) or stops
# (SIGSTOP) in the middle of an all-reduce ends the whole job: mpirun exits
# non-zero, well within the deadline, and the output names the rank (the
# launcher's "process rank 2 ... exited on signal 9", or the survivors'
# "nothing from rank 2 after 3.0 s"). Never a silent hang: each run is
# bounded by timeout(1), and a timeout here is a failure.
set -u
MPIEXEC=$1
BIN=$2
fail=0
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() { # mode deadline bound
    local mode=$1 dl=$2 bound=$3 t0 t1 rc
    t0=$(date +%s.%N)
    MKS_COMM_TIMEOUT=$dl timeout -k 5 "$bound" "$MPIEXEC" -np 3 --oversubscribe "$BIN" "$mode" > "$out" 2>&1
    rc=$?
    t1=$(date +%s.%N)
    local el
    el=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}')
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || awk -v e="$el" -v b="$bound" 'BEGIN{exit !(e >= b - 1)}'; then
        echo "FAIL $mode: exit $rc after $el s (0 = the job went on, 124 = hang past ${bound} s)"
        cat "$out"
        fail=1
    elif ! grep -q "rank 2" "$out"; then
        echo "FAIL $mode: exit $rc after $el s but no message names rank 2:"
        cat "$out"
        fail=1
    else
        echo "ok   $mode: job ended with exit $rc after $el s (deadline $dl s); message:"
        grep -m2 "rank 2" "$out" | grep -v raising | sed 's/^/       /'
    fi
}
run kill 60 45   # the launcher sees the death: ends at once, far within 60 s
run stop 3 45    # only the deadline can see a stopped rank
exit $fail
