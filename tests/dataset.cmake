# Dataset module tests (reader, lint, hist).
mks_add_test(test_reader SOURCES test_reader.c LIBS ds LABELS cpu TIMEOUT 60)
mks_add_test(test_lint SOURCES test_lint.c LIBS ds tk LABELS cpu TIMEOUT 120)
mks_add_test(test_hist SOURCES test_hist.c LIBS ds tk LABELS cpu TIMEOUT 300)

# The JSONL/txt/zstd reader and lint byte checks (mks_add_fuzz: tests/CMakeLists.txt).
mks_add_fuzz(reader SOURCE fuzz_reader.c LIBS ds CORPUS data/fuzz/reader)

# 1 GB single-line inputs through a pipe: peak RSS stays bounded (slow).
mks_add_test(test_rss SOURCES test_rss.c LIBS ds LABELS slow TIMEOUT 600)
mks_add_cli_test(cli_lint cli_lint.sh LABELS cpu TIMEOUT 120)
# gzip inputs through encode/lint/hist/build/--part+merge/tokenizer train (gzip, pigz, bgzip, damage).
mks_add_cli_test(cli_gzip cli_gzip.sh LABELS cpu TIMEOUT 120)

# The build pipeline as a library (ds_build, ds_merge, ds_encode): progress,
# cancellation + resume, thread count, lock, refusals, merge = single build.
mks_add_test(test_ds_build SOURCES test_ds_build.c LIBS ds tk LABELS cpu TIMEOUT 300)
