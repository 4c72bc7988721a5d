# cuDNN's fused attention (kernels/kn_attention_cudnn.cu, MKS_CUDA_ATTENTION=cudnn)
# against the C reference and the own kernels: test_kn_cudnn_gpu (label gpu;
# exits 77 without a GPU or in a build without cuDNN, MKS_CUDNN).
if(MKS_ENABLE_CUDA)
  mks_add_test(test_kn_cudnn_gpu SOURCES test_kn_cudnn_gpu.cu LIBS kn_cuda LABELS gpu TIMEOUT 300)
  set_target_properties(test_kn_cudnn_gpu PROPERTIES COMPILE_OPTIONS "" CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  target_compile_options(test_kn_cudnn_gpu PRIVATE -Xcompiler=-Wall,-Wextra -Wno-deprecated-gpu-targets)
endif()
