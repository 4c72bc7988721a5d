# Hostile inputs for the reader, lint and hist (issue 12 items 6, 8, 9).
# Folder trees, FIFOs/sockets/devices, link loops, bounded-memory structures.
mks_add_test(test_reader_hostile SOURCES test_reader_hostile.c LIBS ds LABELS cpu TIMEOUT 120)
# lint + hist peak RSS independent of the document count: N vs 4N (fast),
# 20 M one-word documents under a fixed bound (slow, about 30-45 s).
mks_add_test(test_analyze_rss_fast SOURCES test_analyze_rss.c LIBS ds tk LABELS cpu TIMEOUT 180)
add_test(NAME test_analyze_rss COMMAND test_analyze_rss_fast slow)
set_tests_properties(test_analyze_rss PROPERTIES LABELS slow TIMEOUT 600 SKIP_RETURN_CODE 77)
mks_add_cli_test(cli_analyze_hostile cli_analyze_hostile.sh LABELS cpu TIMEOUT 180)
