# Model / kernel reference tests (kernels/kn.h, train/model.h).
mks_add_test(test_kn_ops SOURCES test_kn_ops.c LIBS kn LABELS cpu TIMEOUT 120)
mks_add_test(test_model_ref SOURCES test_model_ref.c LIBS tr kn LABELS cpu TIMEOUT 120)
# the same bounds with the matmul's other numerics (test_model_ref itself runs
# the default kernel: FMA where the CPU has it)
add_test(NAME test_model_ref_portable_matmul COMMAND test_model_ref)
# label kernel-twin: the same code as test_model_ref with another matmul
# kernel, which test_kn_ops runs under ASan already: make asan leaves it out
set_tests_properties(test_model_ref_portable_matmul PROPERTIES LABELS "cpu;kernel-twin" TIMEOUT 120
                                                               ENVIRONMENT MKS_MATMUL_ISA=portable)
mks_add_test(test_model_accum SOURCES test_model_accum.c LIBS tr kn LABELS cpu TIMEOUT 120)
