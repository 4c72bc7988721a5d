# Hostile tokenizer files (issue 12, items 4, 7, 8): crafted files written at
# run time are refused with the right code and a message naming the file.
mks_add_test(test_tk_hostile SOURCES test_tk_hostile.c LIBS tk LABELS cpu TIMEOUT 120)
mks_add_cli_test(cli_tk_hostile tk_hostile_cli.sh LABELS cpu TIMEOUT 60)
# Fuzz targets for the three loaders (seeds: tests/data/fuzz/make_tokenizer_seeds.py).
mks_add_fuzz(tiktoken SOURCE fuzz_tiktoken.c LIBS tk CORPUS data/fuzz/tiktoken MAX_LEN 16384)
mks_add_fuzz(tokenizer_json SOURCE fuzz_tokenizer_json.c LIBS tk CORPUS data/fuzz/tokenizer_json MAX_LEN 16384)
mks_add_fuzz(encoder_json SOURCE fuzz_encoder_json.c LIBS tk CORPUS data/fuzz/encoder_json MAX_LEN 16384)
