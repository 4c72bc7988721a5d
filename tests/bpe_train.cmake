# BPE trainer (issue 5): reference comparison, thread determinism, bad inputs.
mks_add_test(test_bpe_train SOURCES test_bpe_train.c LIBS tk ds LABELS cpu TIMEOUT 300)
# Full size bad-input check (a 100 MB document with no whitespace).
mks_add_test(test_bpe_train_big SOURCES test_bpe_train.c LIBS tk ds LABELS cpu slow ARGS full TIMEOUT 900)
# Command line: exit codes, aaabdaaabac, thread determinism, export, HF ids.
mks_add_cli_test(bpe_train_cli bpe_train_cli.sh LABELS cpu TIMEOUT 300)
