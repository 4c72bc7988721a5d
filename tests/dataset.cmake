# Dataset module tests (reader, lint, hist).
mks_add_test(test_reader SOURCES test_reader.c LIBS ds LABELS cpu TIMEOUT 60)
