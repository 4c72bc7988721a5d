# Hostile tokenizer files (issue 12, items 4, 7, 8): crafted files written at
# run time are refused with the right code and a message naming the file.
mks_add_test(test_tk_hostile SOURCES test_tk_hostile.c LIBS tk LABELS cpu TIMEOUT 120)
mks_add_cli_test(cli_tk_hostile tk_hostile_cli.sh LABELS cpu TIMEOUT 60)
