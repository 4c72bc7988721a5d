#!/usr/bin/env bash
# cli_analyze_hostile.sh MKSHARDS SHARED_DIR TEST_DATA - hostile inputs for the
# commands that use the dataset reader (lint, hist, encode): FIFOs, pipes
# from <(...), devices and sockets named as inputs or inside input folders
# are refused with exit 2 and a message naming them, never a blocking read;
# "-" still reads a pipe; empty subfolders and symlink loops are fine. Every
# command runs under `timeout 10`: exit 124 would be a hang.
set -u
M=$1; SHARED=$2
export MKS_VOCAB_DIR=$SHARED/vocab
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
fail=0
run() { timeout 10 "$@" > out 2> err; rc=$?; }
expect() { # expect DESC WANT_RC [STDERR SUBSTRING]
    if [ "$rc" != "$2" ]; then echo "FAIL: $1: exit $rc, expected $2"; head -5 out err; fail=1; return; fi
    if [ $# -ge 3 ] && ! grep -qF -- "$3" err; then echo "FAIL: $1: stderr lacks '$3'"; cat err; fail=1; return; fi
    echo "ok: $1"
}
printf '{"text":"hello world"}\n{"text":"second doc"}\n' > a.jsonl
have_vocab=0; [ -r "$SHARED/vocab/gpt2.tiktoken" ] && have_vocab=1

# ---- item 6: empty subfolders, symlink loops
mkdir -p tree/empty tree/sub/deeper/empty2 && cp a.jsonl tree/sub/
ln -s .. tree/sub/up; ln -s . tree/self
run "$M" lint tree
expect "lint folder with empty subfolders and link loops" 0
grep -q "^2 records" out || { echo "FAIL: records of tree"; cat out; fail=1; }
mkdir empty_only && mkdir empty_only/x
run "$M" lint empty_only
expect "lint a folder of empty folders" 0

# ---- item 8: FIFO named directly (no writer: a plain open would block)
mkfifo f.jsonl
run "$M" lint f.jsonl
expect "lint FIFO named" 2 "f.jsonl: a pipe or FIFO, not a regular file; use - to read from standard input"
run "$M" lint <(cat a.jsonl)
expect "lint <(...) refused" 2 "use - to read from standard input"
run "$M" lint /dev/zero
expect "lint /dev/zero" 2 "/dev/zero: a character device, not a regular file"
run bash -c "cat a.jsonl | timeout 10 '$M' lint -"
expect "lint - reads a pipe" 0
grep -q "^2 records" out || { echo "FAIL: stdin records"; cat out; fail=1; }
# FIFO inside a folder, with a dataset name: refused; without: ignored
mkdir fold && cp a.jsonl fold/ && mkfifo fold/p.jsonl
run "$M" lint fold
expect "lint FIFO inside a folder" 2 "fold/p.jsonl: a pipe or FIFO, not a regular file; remove it from the folder"
rm fold/p.jsonl && mkfifo fold/pipe
run "$M" lint fold
expect "lint folder with a non-dataset FIFO" 0
ln -s /dev/zero fold/z.txt
run "$M" lint fold
expect "lint device link inside a folder" 2 "fold/z.txt: a character device"
rm fold/z.txt
ln -s missing.jsonl fold/dangling.jsonl
run "$M" lint fold
expect "lint dangling link inside a folder" 2 "fold/dangling.jsonl: symbolic link to nothing readable"
rm fold/dangling.jsonl

if [ $have_vocab = 1 ]; then
    run "$M" hist -t gpt2 f.jsonl
    expect "hist FIFO named" 2 "use - to read from standard input"
    run "$M" hist -t gpt2 tree
    expect "hist folder with empty subfolders" 0
    run "$M" encode -t gpt2 f.jsonl --ids-out ids.bin
    expect "encode FIFO named" 2 "use - to read from standard input"
    run bash -c "cat a.jsonl | timeout 10 '$M' encode -t gpt2 - --ids-out ids.bin"
    expect "encode - reads a pipe" 0
else
    echo "note: $SHARED/vocab/gpt2.tiktoken not found: hist/encode cases skipped"
fi
[ $fail = 0 ] && echo "cli_analyze_hostile: ok"
exit $fail
