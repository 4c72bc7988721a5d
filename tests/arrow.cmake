# Parquet and Arrow IPC inputs (issue 29; dataset/arrow_reader.cpp, built
# with MKS_ENABLE_ARROW). cli_arrow runs in every build: without Arrow it
# checks that .parquet / .arrow are refused (exit 2, naming the option);
# with it, every command against the same documents in JSONL, with fixtures
# pyarrow writes at test time (tests/make_arrow_fixtures.py).
add_test(NAME cli_arrow COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_arrow.sh $<TARGET_FILE:mkshards> ${MKS_SHARED_DIR}
                                ${CMAKE_CURRENT_SOURCE_DIR}/data ${CMAKE_CURRENT_BINARY_DIR} "${MKS_ARROW_PYTHON_USED}")
set_tests_properties(cli_arrow PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 300)
if(MKS_HAVE_ARROW)
  # the wrapper with Arrow's checks on (seeds: tests/data/fuzz/make_arrow_seeds.py)
  mks_add_fuzz(arrow SOURCE fuzz_arrow.c LIBS ds CORPUS data/fuzz/arrow)
  # the pipeline's first batches on columnar input (run by cli_arrow.sh on a fixture it writes)
  add_executable(test_arrow_pipeline test_arrow_pipeline.c)
  target_link_libraries(test_arrow_pipeline PRIVATE ds)
endif()
# Chat / prompt-completion records from Parquet / Arrow IPC columns (list<struct<role, content>>, ...):
# the same shards, accounting, rejects, lint findings, histogram and ids as the same rows in JSONL
# (tests/make_arrow_chat_fixtures.py writes both at test time)
add_test(NAME cli_arrow_chat COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli_arrow_chat.sh $<TARGET_FILE:mkshards>
                                     ${MKS_SHARED_DIR} ${CMAKE_CURRENT_BINARY_DIR} "${MKS_ARROW_PYTHON_USED}")
set_tests_properties(cli_arrow_chat PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 300)
