# GPU tests (label gpu): built only with MKS_ENABLE_CUDA; each exits 77 when
# no GPU is present, so ctest reports them skipped on CPU-only machines.
if(MKS_ENABLE_CUDA)
  mks_add_test(test_kernels_gpu SOURCES test_kernels_gpu.cu LIBS kn_cuda LABELS gpu TIMEOUT 300)
  # nvcc does not take the project's C warning flags: use their -Xcompiler forms.
  set_target_properties(test_kernels_gpu PROPERTIES COMPILE_OPTIONS "" CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  target_compile_options(test_kernels_gpu PRIVATE -Xcompiler=-Wall,-Wextra -Wno-deprecated-gpu-targets)
endif()
if(MKS_ENABLE_CUDA)
  mks_add_test(test_tr_cuda_gpu SOURCES test_tr_cuda_gpu.cu LIBS tr_cuda LABELS gpu TIMEOUT 120)
  set_target_properties(test_tr_cuda_gpu PROPERTIES COMPILE_OPTIONS "" CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  target_compile_options(test_tr_cuda_gpu PRIVATE -Xcompiler=-Wall,-Wextra -Wno-deprecated-gpu-targets)
endif()
# Kernel timings + projected step at GPT-2 shapes (run by tests/gpu/run.sh; not a ctest).
if(MKS_ENABLE_CUDA)
  add_executable(bench_kernels_gpu bench_kernels_gpu.cu)
  target_link_libraries(bench_kernels_gpu PRIVATE kn_cuda)
  set_target_properties(bench_kernels_gpu PROPERTIES COMPILE_OPTIONS "" CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  target_compile_options(bench_kernels_gpu PRIVATE -Xcompiler=-Wall,-Wextra -Wno-deprecated-gpu-targets)
endif()
if(MKS_ENABLE_CUDA)
  mks_add_test(test_tr_cuda_model_gpu SOURCES test_tr_cuda_model_gpu.cu LIBS tr_cuda LABELS gpu TIMEOUT 300)
  set_target_properties(test_tr_cuda_model_gpu PROPERTIES COMPILE_OPTIONS "" CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  target_compile_options(test_tr_cuda_model_gpu PRIVATE -Xcompiler=-Wall,-Wextra -Wno-deprecated-gpu-targets)
endif()
# GPU training benchmark on a shard set (run by tests/gpu/run.sh; not a ctest).
if(MKS_ENABLE_CUDA)
  add_executable(bench_train_gpu bench_train_gpu.cu)
  target_link_libraries(bench_train_gpu PRIVATE tr_cuda)
  set_target_properties(bench_train_gpu PROPERTIES COMPILE_OPTIONS "" CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  target_compile_options(bench_train_gpu PRIVATE -Xcompiler=-Wall,-Wextra -Wno-deprecated-gpu-targets)
endif()
# The Llama family trained by llmtrain --device cuda against --device cpu (losses, resume bit for bit; exit 77
# without a GPU).
if(MKS_ENABLE_CUDA)
  add_test(NAME llmtrain_cuda_llama COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/llmtrain_cuda_llama.sh
                                            $<TARGET_FILE:llmtrain> ${CMAKE_CURRENT_SOURCE_DIR}/data/golden_train/inputs/concat)
  set_tests_properties(llmtrain_cuda_llama PROPERTIES LABELS gpu TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
# Every family names its GPU model in a CUDA build (tr_family_ops.gpu: the CUDA backend's only way to it).
if(MKS_ENABLE_CUDA)
  mks_add_test(test_family_gpu SOURCES test_family_gpu.c LIBS tr LABELS cpu TIMEOUT 30)
endif()
# The GPU step as a whole (issue 31 item 3): device-summed loss, multi-tensor AdamW and CUDA graphs bit for bit
# against the eager per-tensor path, GPT-2 and Llama, through the GPU session.
if(MKS_ENABLE_CUDA)
  mks_add_test(test_tr_cuda_step_gpu SOURCES test_tr_cuda_step_gpu.cu LIBS tr_cuda LABELS gpu TIMEOUT 300)
  set_target_properties(test_tr_cuda_step_gpu PROPERTIES COMPILE_OPTIONS "" CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  target_compile_options(test_tr_cuda_step_gpu PRIVATE -Xcompiler=-Wall,-Wextra -Wno-deprecated-gpu-targets)
endif()
