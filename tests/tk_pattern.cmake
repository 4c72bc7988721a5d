# A rank file with its own pre-tokenizer regex / normalization (--pattern REGEX, --normalize;
# tokenizer/rank_pretok.c) against tiktoken.Encoding(pat_str=...) on unicodedata.normalize's output
# (refs from tests/ref/make_tk_pattern_refs.py); its parity part needs ../shared (strict in CI).
mks_add_test(test_tk_pattern SOURCES test_tk_pattern.c LIBS tk PkgConfig::ZSTD PkgConfig::JANSSON PkgConfig::NETTLE
             LABELS cpu TIMEOUT 300 ARGS ${MKS_SHARED_DIR})
# The regex and normalization given to a rank file, as untrusted bytes (seeds: tests/data/fuzz/make_tk_pattern_seeds.py).
mks_add_fuzz(tk_pattern SOURCE fuzz_tk_pattern.c LIBS tk CORPUS data/fuzz/tk_pattern MAX_LEN 8192)
# The CLI: manifest records, fingerprints, resume / merge refusals, names vs regexes, messages.
mks_add_cli_test(cli_pattern cli_pattern.sh LABELS cpu TIMEOUT 300)
# The regex class tables (regex_sets.c, regex_ucd.c) after a first use that ran out of memory: the next call builds
# them (they used to stay refused for the life of the process).
mks_add_test(test_regex_nomem SOURCES test_regex_nomem.c LIBS tk LABELS cpu TIMEOUT 60)
mks_allow_skip(test_regex_nomem "replaces glibc malloc, which AddressSanitizer owns (skips in sanitizer builds only)")
