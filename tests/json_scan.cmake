# JSON fast path (dataset/json_scan.c): differential test against jansson on
# hand-written edge cases, the shared corpus and 200k random mutations.
mks_add_test(test_json_scan SOURCES test_json_scan.c LIBS ds tk PkgConfig::JANSSON LABELS cpu TIMEOUT 600)
