# Model / kernel reference tests (kernels/kn.h, train/model.h).
mks_add_test(test_model_ref SOURCES test_model_ref.c LIBS tr kn LABELS cpu TIMEOUT 120)
