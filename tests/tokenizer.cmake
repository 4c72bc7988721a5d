# Tokenizer tests.
mks_add_test(test_tk_parity SOURCES test_tk_parity.c LIBS tk PkgConfig::ZSTD PkgConfig::JANSSON LABELS cpu TIMEOUT 600)
mks_add_test(test_tk_unit SOURCES test_tk_unit.c LIBS tk PkgConfig::JANSSON LABELS cpu)
mks_add_test(test_tk_pathological SOURCES test_tk_pathological.c LIBS tk LABELS cpu TIMEOUT 300)
# Table images of known rank files (tokenizer/tk_image.c).
mks_add_test(test_tk_image SOURCES test_tk_image.c LIBS tk LABELS cpu TIMEOUT 120)
# HF tokenizer.json parity (refs from tests/ref/make_tk_hf_refs.py).
mks_add_test(test_tk_hf SOURCES test_tk_hf.c LIBS tk PkgConfig::ZSTD PkgConfig::JANSSON PkgConfig::NETTLE LABELS cpu TIMEOUT 600)
# Merging from characters (bpe.c) against the textbook byte merge loop.
mks_add_test(test_bpe_chars SOURCES test_bpe_chars.c LIBS tk PkgConfig::ZSTD PkgConfig::JANSSON LABELS cpu TIMEOUT 300)
