# SentencePiece .model parity (fixtures and refs from tests/ref/make_tk_spm_fixtures.py),
# the CLI with .model files, and the fuzz target of the .model reader
# (seeds: tests/data/fuzz/make_spm_seeds.py).
mks_add_test(test_tk_spm SOURCES test_tk_spm.c LIBS tk PkgConfig::ZSTD PkgConfig::JANSSON PkgConfig::NETTLE LABELS cpu TIMEOUT 600)
mks_add_cli_test(cli_spm cli_spm.sh LABELS cpu TIMEOUT 120)
mks_add_fuzz(spm_model SOURCE fuzz_spm_model.c LIBS tk CORPUS data/fuzz/spm_model MAX_LEN 65536)
