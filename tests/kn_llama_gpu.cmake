# The Llama family's CUDA kernels (kernels/kn_llama.cu) against their C
# references (kernels/llama_ref.c, llama_gqa_ref.c): test_kn_llama_gpu (label
# gpu, exits 77 without a GPU); the same program's reference-side checks
# (--cpu: rotary table, GQA reference vs MHA and finite differences) run
# everywhere the CUDA build does, as test_kn_llama_gpu_refs (label cpu).
if(MKS_ENABLE_CUDA)
  mks_add_test(test_kn_llama_gpu SOURCES test_kn_llama_gpu.cu LIBS kn_cuda LABELS gpu TIMEOUT 300)
  set_target_properties(test_kn_llama_gpu PROPERTIES COMPILE_OPTIONS "" CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  target_compile_options(test_kn_llama_gpu PRIVATE -Xcompiler=-Wall,-Wextra -Wno-deprecated-gpu-targets)
  add_test(NAME test_kn_llama_gpu_refs COMMAND test_kn_llama_gpu --cpu)
  set_tests_properties(test_kn_llama_gpu_refs PROPERTIES LABELS cpu TIMEOUT 120)
endif()
# The GPU Llama model (train/gpu_llama.cu) against the CPU one (train/llama_model.c):
# loss, every gradient, a clipped AdamW step (label gpu); and its benchmark at a
# Llama shape, run by tests/gpu/run.sh step 10b (not a ctest).
if(MKS_ENABLE_CUDA)
  mks_add_test(test_tr_cuda_llama_gpu SOURCES test_tr_cuda_llama_gpu.cu LIBS tr_cuda LABELS gpu TIMEOUT 300)
  set_target_properties(test_tr_cuda_llama_gpu PROPERTIES COMPILE_OPTIONS "" CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  target_compile_options(test_tr_cuda_llama_gpu PRIVATE -Xcompiler=-Wall,-Wextra -Wno-deprecated-gpu-targets)
  add_executable(bench_llama_gpu bench_llama_gpu.cu)
  target_link_libraries(bench_llama_gpu PRIVATE tr_cuda)
  set_target_properties(bench_llama_gpu PROPERTIES COMPILE_OPTIONS "" CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  target_compile_options(bench_llama_gpu PRIVATE -Xcompiler=-Wall,-Wextra -Wno-deprecated-gpu-targets)
endif()
# The planner's rows of the GPU Llama model (train/gpu_llama_plan.c, tr_plan)
# equal the model's carve (tr_cuda_llama_arena_bytes: host code, no GPU needed).
if(MKS_ENABLE_CUDA)
  mks_add_test(test_llama_gpu_plan SOURCES test_llama_gpu_plan.c LIBS tr LABELS cpu TIMEOUT 60)
endif()
