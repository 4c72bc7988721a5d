# Trainer system (train/tr.h): loader, planner, checkpoints, training runs.
mks_add_test(test_trainer SOURCES test_trainer.c LIBS tr kn ds tk LABELS cpu TIMEOUT 900)
mks_add_test(test_trainer_rss SOURCES test_trainer_rss.c LIBS tr kn ds tk LABELS cpu TIMEOUT 300)
# The planner's GPU rows (kernel scratch, cuBLAS workspace, optimizer state)
# against the kernels' own size functions and the optimizer's layout, over a
# grid of shapes; links tr_plan alone, as `mkshards plan` does.
mks_add_test(test_plan_kernels SOURCES test_plan_kernels.c LIBS tr_plan LABELS cpu TIMEOUT 60)
mks_add_cli_test(cli_llmtrain cli_llmtrain.sh LABELS cpu TIMEOUT 600)
# The Llama family through llmtrain (train/family.h): plan, resume, accumulation, --doc-mask, config.json
mks_add_cli_test(cli_llmtrain_llama cli_llmtrain_llama.sh LABELS cpu TIMEOUT 600)
# a checkpoint's model record (DIR/model.txt, train/family.c), untrusted on --resume and export
mks_add_fuzz(family_config SOURCE fuzz_family_config.c LIBS tr CORPUS data/fuzz/family_config MAX_LEN 4096)
# the same check on a small plan, where fixed costs dominate
add_test(NAME test_trainer_rss_small COMMAND test_trainer_rss 8)
set_tests_properties(test_trainer_rss_small PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 300)
# and for the Llama family (its plan rows are tr_llama_memory's, train/family_llama.c)
add_test(NAME test_trainer_rss_llama COMMAND test_trainer_rss 48 llama-tiny)
set_tests_properties(test_trainer_rss_llama PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 300)
mks_allow_skip(test_trainer_rss_llama "peak RSS is meaningless under AddressSanitizer (skips in sanitizer builds only)")
mks_allow_skip(test_trainer_rss "peak RSS is meaningless under AddressSanitizer (skips in sanitizer builds only)")
mks_allow_skip(test_trainer_rss_small "peak RSS is meaningless under AddressSanitizer (skips in sanitizer builds only)")
# Golden llmtrain runs (tests/golden_train, inputs + expected values in
# tests/data/golden_train, recorded by record.sh before issue 13's backend
# split): per-step losses and the final checkpoint bit-identical for plain,
# --doc-mask, accumulation and stopped/killed/resumed runs. Not registered
# with MKS_NATIVE (-march=native may change the floating-point results).
# The record is of the matmul's exact numerics (no FMA), the same on any CPU:
# golden_train runs it with the AVX-512 exact kernel (the portable one where
# the CPU lacks AVX-512), golden_train_portable_matmul with the portable one.
# golden_train_fma checks the default FMA kernels (kernels/matmul_ref.c):
# AVX-512 FMA = AVX2 FMA bitwise, resume bit-exact, values within 1e-5 of
# the record (check.sh --fma; skips without FMA).
if(NOT MKS_NATIVE)
  add_test(NAME golden_train COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/golden_train/check.sh $<TARGET_FILE:llmtrain>)
  set_tests_properties(golden_train PROPERTIES LABELS cpu SKIP_RETURN_CODE 77 TIMEOUT 600
                                               ENVIRONMENT MKS_MATMUL_ISA=avx512)
  add_test(NAME golden_train_portable_matmul COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/golden_train/check.sh
                                                     $<TARGET_FILE:llmtrain>)
  # kernel-twin (also golden_train_fma): golden_train's run with another
  # matmul kernel; make asan leaves them out (each kernel runs under ASan in
  # test_kn_ops, the trainer in golden_train), the release stage runs them
  set_tests_properties(golden_train_portable_matmul PROPERTIES LABELS "cpu;kernel-twin" SKIP_RETURN_CODE 77 TIMEOUT 600
                                                               ENVIRONMENT MKS_MATMUL_ISA=portable)
  add_test(NAME golden_train_fma COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/golden_train/check.sh $<TARGET_FILE:llmtrain>
                                         --fma)
  set_tests_properties(golden_train_fma PROPERTIES LABELS "cpu;kernel-twin" SKIP_RETURN_CODE 77 TIMEOUT 600)
  mks_allow_skip(golden_train_fma "a CPU without FMA has no FMA matmul kernel to check (golden_train covers it)")
endif()
