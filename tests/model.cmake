# Model / kernel reference tests (kernels/kn.h, train/model.h).
mks_add_test(test_kn_ops SOURCES test_kn_ops.c LIBS kn LABELS cpu TIMEOUT 120)
mks_add_test(test_model_ref SOURCES test_model_ref.c LIBS tr kn LABELS cpu TIMEOUT 120)
mks_add_test(test_model_accum SOURCES test_model_accum.c LIBS tr kn LABELS cpu TIMEOUT 120)
