# SentencePiece Unigram .model parity: test_tk_spm's checks on the fixtures of
# tests/data/tk_unigram (made by tests/ref/make_tk_unigram_fixtures.py).
mks_add_test(test_tk_unigram SOURCES test_tk_spm.c LIBS tk PkgConfig::ZSTD PkgConfig::JANSSON PkgConfig::NETTLE LABELS cpu
             TIMEOUT 600 ARGS ${MKS_SHARED_DIR} - 1 tk_unigram)
