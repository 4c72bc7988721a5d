# Hostile tokenizer files (issue 12, items 4, 7, 8): crafted files written at
# run time are refused with the right code and a message naming the file.
mks_add_test(test_tk_hostile SOURCES test_tk_hostile.c LIBS tk LABELS cpu TIMEOUT 120)
mks_add_cli_test(cli_tk_hostile tk_hostile_cli.sh LABELS cpu TIMEOUT 60)
# Fuzz targets for the three loaders (seeds: tests/data/fuzz/make_tokenizer_seeds.py).
mks_add_fuzz(tiktoken SOURCE fuzz_tiktoken.c LIBS tk CORPUS data/fuzz/tiktoken MAX_LEN 16384)
mks_add_fuzz(tokenizer_json SOURCE fuzz_tokenizer_json.c LIBS tk CORPUS data/fuzz/tokenizer_json MAX_LEN 16384)
mks_add_fuzz(encoder_json SOURCE fuzz_encoder_json.c LIBS tk CORPUS data/fuzz/encoder_json MAX_LEN 16384)
# Per-document tokenizer limits (issue 32, items 1-3): hostile_tk_gen writes
# the crafted tokenizers of hostile_tk.h; tk_limits_cli.sh runs encode, build,
# lint and hist on them (time, memory, one bad document among good ones), and
# with "corpus" checks that real tokenizers never hit a limit on ../shared/corpus.
add_executable(hostile_tk_gen hostile_tk_gen.c)
add_test(NAME cli_tk_limits
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tk_limits_cli.sh $<TARGET_FILE:mkshards> ${MKS_SHARED_DIR}
                 ${CMAKE_CURRENT_SOURCE_DIR}/data $<TARGET_FILE:hostile_tk_gen>)
set_tests_properties(cli_tk_limits PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 300)
add_test(NAME cli_tk_limits_corpus
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tk_limits_cli.sh $<TARGET_FILE:mkshards> ${MKS_SHARED_DIR}
                 ${CMAKE_CURRENT_SOURCE_DIR}/data $<TARGET_FILE:hostile_tk_gen> corpus)
set_tests_properties(cli_tk_limits_corpus PROPERTIES LABELS "cpu;slow" SKIP_RETURN_CODE 77 TIMEOUT 600)
# Normalizer, pre-tokenizer and decoder chains with the per-document limits
# (seeds: tests/data/fuzz/make_chain_seeds.py).
mks_add_fuzz(tk_chains SOURCE fuzz_tk_chains.c LIBS tk CORPUS data/fuzz/tk_chains MAX_LEN 16384)
