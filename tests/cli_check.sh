# cli_check.sh - sourced by the CLI test scripts: pass/fail bookkeeping and
# run(), which checks a command's exit code and the words of its message.
# The caller sets T (a scratch folder) before calling run; `exit $fail` at
# the end makes any bad() fail the test.
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
# run WANT_RC WHAT PATTERN... -- CMD...: the exit code and every pattern in
# stderr; a command still running after 10 s counts as hung.
run() {
    local want=$1 what=$2; shift 2
    local pats=()
    while [ "$1" != "--" ]; do pats+=("$1"); shift; done
    shift
    timeout 10 "$@" >"$T/out" 2>"$T/err"
    local rc=$?
    if [ $rc = 124 ]; then bad "$what: hung (killed after 10 s)"; return; fi
    if [ $rc != "$want" ]; then bad "$what: exit $rc, want $want: $(head -c 400 "$T/err")"; return; fi
    for p in "${pats[@]}"; do
        grep -qF -- "$p" "$T/err" || { bad "$what: message lacks '$p': $(head -c 400 "$T/err")"; return; }
    done
    ok "$what (exit $rc): $(head -1 "$T/err" | head -c 160)"
}
# expect_rc WANT GOT WHAT: an exit code already taken (stderr in $T/err)
expect_rc() {
    if [ "$1" = "$2" ]; then ok "$3 (exit $2)"; else bad "$3: exit $2, want $1"; head -5 "$T/err" 2>/dev/null; fi
}
