# Llama-family op references (kernels/llama_ref.c, issue 30 step 4) against
# transformers' fp32 values and gradients (tests/data/hf/llama_ops.json, made
# by tests/hf/make_llama_ops_fixture.py).
mks_add_test(test_kn_llama SOURCES test_kn_llama.c LIBS kn PkgConfig::JANSSON LABELS cpu TIMEOUT 60)
# the Llama-family model on those references (train/llama_model.c): logits,
# loss and every gradient vs transformers (tests/data/hf/llama_model.json,
# tests/hf/make_llama_model_fixture.py)
mks_add_test(test_llama_model SOURCES test_llama_model.c LIBS tr kn PkgConfig::JANSSON LABELS cpu TIMEOUT 120)
# transformers parity with the matmul's exact numerics too (the default is FMA)
add_test(NAME test_llama_model_portable_matmul COMMAND test_llama_model)
# (kernel-twin: make asan leaves it out, test_kn_ops runs that kernel under ASan)
set_tests_properties(test_llama_model_portable_matmul PROPERTIES LABELS "cpu;kernel-twin" TIMEOUT 120
                                                                 ENVIRONMENT MKS_MATMUL_ISA=portable)
# the family's configurations (train/llama_config.c): preset parameter
# counts, config.json of Llama / Qwen2 / Mistral, refusals
mks_add_test(test_llama_config SOURCES test_llama_config.c LIBS tr PkgConfig::JANSSON LABELS cpu TIMEOUT 30)
mks_add_fuzz(llama_config SOURCE fuzz_llama_config.c LIBS tr CORPUS data/fuzz/llama_config MAX_LEN 4096)
# a Hugging Face folder into the CPU model (train/llama_hf.c): transformers'
# save_pretrained output (single and sharded) gives transformers' loss
# (tests/data/hf/llama_import, tests/hf/make_llama_import_fixture.py)
mks_add_test(test_llama_import SOURCES test_llama_import.c LIBS tr kn PkgConfig::JANSSON LABELS cpu TIMEOUT 60)

# Not a test: the CPU Llama per-step timing for tools/bench comparisons (issue 30 item 5).
add_executable(bench_llama_cpu_step bench_llama_cpu_step.c)
target_link_libraries(bench_llama_cpu_step PRIVATE tr kn)
# the CPU model's one-block memory (tr_llama_memory / tr_llama_reserve): the
# block the formula gives, no large allocation per step, a dirty block's
# result equal to a fresh model's, overflowing sizes refused
mks_add_test(test_llama_reserve SOURCES test_llama_reserve.c LIBS tr kn LABELS cpu TIMEOUT 180)
# the CPU model's Llama kernels (kernels/llama_cpu_ref.c) against the
# references they replace: bitwise, or 1e-6 of the max where sums reassociate
mks_add_test(test_llama_cpu_kernels SOURCES test_llama_cpu_kernels.c LIBS kn LABELS cpu TIMEOUT 60)
