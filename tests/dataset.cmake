# Dataset module tests (reader, lint, hist).
mks_add_test(test_reader SOURCES test_reader.c LIBS ds LABELS cpu TIMEOUT 60)
mks_add_test(test_lint SOURCES test_lint.c LIBS ds tk LABELS cpu TIMEOUT 120)
mks_add_test(test_hist SOURCES test_hist.c LIBS ds tk LABELS cpu TIMEOUT 300)
