# CLI tests for the mkshards tool (tests/cli_*.sh). Included by tests/CMakeLists.txt.
mks_add_cli_test(cli_encode cli_encode.sh LABELS cpu TIMEOUT 120)
