# SentencePiece .model parity (fixtures and refs from tests/ref/make_tk_spm_fixtures.py).
mks_add_test(test_tk_spm SOURCES test_tk_spm.c LIBS tk PkgConfig::ZSTD PkgConfig::JANSSON PkgConfig::NETTLE LABELS cpu TIMEOUT 600)
mks_add_cli_test(cli_spm cli_spm.sh LABELS cpu TIMEOUT 120)
