# `llmtrain export` (train/export.c, issue 30): the exported folder's tensors
# against the parameters, and its loss / tokenizer ids against the figures
# transformers computed (tests/data/hf/export_gpt2.json, made by
# tests/hf/make_export_fixture.py; CI needs no torch). hf_export_transformers
# (label manual) re-runs transformers when it is installed.
mks_add_test(test_hf_export SOURCES test_hf_export.c LIBS tr kn ds tk LABELS cpu TIMEOUT 300)
add_test(NAME hf_export_transformers
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/hf/make_export_fixture.py --check $<TARGET_FILE:test_hf_export>)
set_tests_properties(hf_export_transformers PROPERTIES LABELS "manual;slow" SKIP_RETURN_CODE 77 TIMEOUT 600)
mks_allow_skip(hf_export_transformers "needs torch and transformers, which CI does not install; test_hf_export checks the committed figures")
mks_add_cli_test(cli_export cli_export.sh LABELS cpu TIMEOUT 300)
# The Llama family's export and --init-from (tests/hf/make_llama_export_fixture.py):
# transformers' losses committed in tests/data/hf/export_llama.json, checked
# without torch by cli_llmtrain_llama; this re-runs transformers when installed.
add_test(NAME hf_export_llama_transformers
         COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/hf/make_llama_export_fixture.py --check $<TARGET_FILE:test_hf_export>)
set_tests_properties(hf_export_llama_transformers PROPERTIES LABELS "manual;slow" SKIP_RETURN_CODE 77 TIMEOUT 600)
mks_allow_skip(hf_export_llama_transformers "needs torch and transformers, which CI does not install; cli_llmtrain_llama checks the committed figures")
