# A rank file with its own pre-tokenizer regex / normalization (--pattern REGEX, --normalize;
# tokenizer/rank_pretok.c) against tiktoken.Encoding(pat_str=...) on unicodedata.normalize's output
# (refs from tests/ref/make_tk_pattern_refs.py); its parity part needs ../shared (strict in CI).
mks_add_test(test_tk_pattern SOURCES test_tk_pattern.c LIBS tk PkgConfig::ZSTD PkgConfig::JANSSON PkgConfig::NETTLE
             LABELS cpu TIMEOUT 300 ARGS ${MKS_SHARED_DIR})
