# Tokenizer tests.
mks_add_test(test_tk_parity SOURCES test_tk_parity.c LIBS tk PkgConfig::ZSTD PkgConfig::JANSSON LABELS cpu TIMEOUT 600)
mks_add_test(test_tk_unit SOURCES test_tk_unit.c LIBS tk PkgConfig::JANSSON LABELS cpu)
mks_add_test(test_tk_pathological SOURCES test_tk_pathological.c LIBS tk LABELS cpu TIMEOUT 300)
# Table images of known rank files (tokenizer/tk_image.c).
mks_add_test(test_tk_image SOURCES test_tk_image.c LIBS tk LABELS cpu TIMEOUT 120)
# HF tokenizer.json parity (refs from tests/ref/make_tk_hf_refs.py).
mks_add_test(test_tk_hf SOURCES test_tk_hf.c LIBS tk PkgConfig::ZSTD PkgConfig::JANSSON PkgConfig::NETTLE LABELS cpu TIMEOUT 600)
# HF tokenizer.json with a Unigram model (T5/XLM-R/ALBERT converted, HF-trained):
# tests/data/tk_hf_uni, fixtures and refs from tests/ref/make_tk_hf_uni_fixtures.py.
mks_add_test(test_tk_hf_uni SOURCES test_tk_hf.c LIBS tk PkgConfig::ZSTD PkgConfig::JANSSON PkgConfig::NETTLE LABELS cpu
             TIMEOUT 600 ARGS ${MKS_SHARED_DIR} - tk_hf_uni)
# HF tokenizer.json with a WordPiece or WordLevel model (BERT files cut down, HF-trained
# WordLevel): tests/data/tk_hf_wp, fixtures and refs from tests/ref/make_tk_hf_wp_fixtures.py.
mks_add_test(test_tk_hf_wp SOURCES test_tk_hf.c LIBS tk PkgConfig::ZSTD PkgConfig::JANSSON PkgConfig::NETTLE LABELS cpu
             TIMEOUT 600 ARGS ${MKS_SHARED_DIR} - tk_hf_wp)
# The HF engine's fast paths (Replace without the regex engine, the Unigram lattice's
# score ring) against their plain counterparts, on tokenizer.json files written at test time.
mks_add_test(test_tk_hf_fast SOURCES test_tk_hf_fast.c LIBS tk LABELS cpu TIMEOUT 300)
# Meta's Llama 3 / Llama 4 tokenizer.model against Meta's tokenizer code (refs from
# tests/ref/make_tk_meta_refs.py); tk_meta.sh fetches the files (llama-models on PyPI), skips without them.
add_executable(test_tk_meta test_tk_meta.c)
target_link_libraries(test_tk_meta PRIVATE tk PkgConfig::ZSTD PkgConfig::JANSSON PkgConfig::NETTLE)
target_compile_definitions(test_tk_meta PRIVATE MKS_TEST_DATA="${CMAKE_CURRENT_SOURCE_DIR}/data")
add_test(NAME test_tk_meta COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tk_meta.sh $<TARGET_FILE:test_tk_meta>
         $<TARGET_FILE:mkshards> ${MKS_SHARED_DIR} ${CMAKE_BINARY_DIR}/llama-models)
set_tests_properties(test_tk_meta PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 600)
# Merging from characters (bpe.c) against the textbook byte merge loop.
mks_add_test(test_bpe_chars SOURCES test_bpe_chars.c LIBS tk PkgConfig::ZSTD PkgConfig::JANSSON LABELS cpu TIMEOUT 300)
