# Mistral's tekken.json (tokenizer/load_tekken.c) against mistral_common's Tekkenizer
# (refs and the two crafted fixtures from tests/ref/make_tk_tekken_refs.py): the fixtures
# always; the real files mistral_common ships through tk_tekken_real.sh, which fetches
# the wheel from PyPI and skips without it.
add_executable(test_tk_tekken test_tk_tekken.c)
target_link_libraries(test_tk_tekken PRIVATE tk PkgConfig::ZSTD PkgConfig::JANSSON PkgConfig::NETTLE)
target_compile_definitions(test_tk_tekken PRIVATE MKS_TEST_DATA="${CMAKE_CURRENT_SOURCE_DIR}/data")
add_test(NAME test_tk_tekken COMMAND test_tk_tekken ${MKS_SHARED_DIR})
set_tests_properties(test_tk_tekken PROPERTIES LABELS cpu TIMEOUT 300)
add_test(NAME test_tk_tekken_real COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tk_tekken_real.sh
         $<TARGET_FILE:test_tk_tekken> $<TARGET_FILE:mkshards> ${MKS_SHARED_DIR} ${CMAKE_BINARY_DIR}/mistral-common)
set_tests_properties(test_tk_tekken_real PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 600)
# Fuzz target for the tekken.json reader (seeds: tests/data/fuzz/make_tekken_seeds.py).
mks_add_fuzz(tekken SOURCE fuzz_tekken.c LIBS tk CORPUS data/fuzz/tekken MAX_LEN 16384)
