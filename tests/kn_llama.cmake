# Llama-family op references (kernels/llama_ref.c, issue 30 step 4) against
# transformers' fp32 values and gradients (tests/data/hf/llama_ops.json, made
# by tests/hf/make_llama_ops_fixture.py).
mks_add_test(test_kn_llama SOURCES test_kn_llama.c LIBS kn PkgConfig::JANSSON LABELS cpu TIMEOUT 60)
