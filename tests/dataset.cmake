# Dataset module tests (reader, lint, hist).
mks_add_test(test_reader SOURCES test_reader.c LIBS ds LABELS cpu TIMEOUT 60)
mks_add_test(test_lint SOURCES test_lint.c LIBS ds tk LABELS cpu TIMEOUT 120)
mks_add_test(test_hist SOURCES test_hist.c LIBS ds tk LABELS cpu TIMEOUT 300)

# Fuzzing: the committed corpus is replayed by a plain executable in every
# build; with -DMKS_FUZZ=ON (CC=clang) a libFuzzer binary is built too and a
# bounded ASan fuzz run is registered (label fuzz).
mks_add_test(test_fuzz_replay SOURCES fuzz_replay.c fuzz_reader.c LIBS ds LABELS cpu TIMEOUT 120)
if(MKS_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "MKS_FUZZ needs clang: configure with CC=clang")
  endif()
  target_compile_options(ds PRIVATE -fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
  target_link_options(ds INTERFACE -fsanitize=address,undefined)
  add_executable(fuzz_reader fuzz_reader.c)
  target_compile_options(fuzz_reader PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(fuzz_reader PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_reader PRIVATE ds)
  set(MKS_FUZZ_SECONDS 60 CACHE STRING "seconds of fuzzing in the fuzz_reader_run test")
  add_test(NAME fuzz_reader_run
           COMMAND bash -c "d=$(mktemp -d) && $<TARGET_FILE:fuzz_reader> -max_total_time=${MKS_FUZZ_SECONDS} -timeout=10 -rss_limit_mb=2048 -max_len=65536 \"$d\" ${CMAKE_CURRENT_SOURCE_DIR}/data/fuzz/reader; rc=$?; rm -rf \"$d\"; exit $rc")
  set_tests_properties(fuzz_reader_run PROPERTIES LABELS "fuzz" TIMEOUT 600)
endif()

# 1 GB single-line inputs through a pipe: peak RSS stays bounded (slow).
mks_add_test(test_rss SOURCES test_rss.c LIBS ds LABELS slow TIMEOUT 600)
mks_add_cli_test(cli_lint cli_lint.sh LABELS cpu TIMEOUT 120)
