# CLI tests for the mkshards tool (tests/cli_*.sh). Included by tests/CMakeLists.txt.
mks_add_cli_test(cli_encode cli_encode.sh LABELS cpu TIMEOUT 120)

# the id formatter of mkshards encode (tools/cli.c is linked in directly)
mks_add_test(test_cli_fmt SOURCES test_cli_fmt.c ${PROJECT_SOURCE_DIR}/tools/cli.c LIBS tk ds LABELS cpu)
target_include_directories(test_cli_fmt PRIVATE ${PROJECT_SOURCE_DIR}/tools)
