# CPU tests of the GPU path (issue 14): they run everywhere, label cpu.
#  test_cuda_msg: the CUDA/cuBLAS error-message path (kernels/kn_cuda_err.h)
#    driven by a fake failing CUDA API through the macros the .cu files use.
#  test_fp16_scale: the fp16 loss-scaling scheme (train/gpu_model.h),
#    the GPU model's fp16 forward/backward emulated with the kn reference
#    kernels: 100 training steps of a small model, no step skipped.
mks_add_test(test_cuda_msg SOURCES test_cuda_msg.c LIBS kn Threads::Threads LABELS cpu TIMEOUT 60)
mks_add_test(test_fp16_scale SOURCES test_fp16_scale.c LIBS tr kn LABELS cpu TIMEOUT 300)
# test_gpu_step: the host logic of the GPU step (train/gpu_step.h: switches,
# target count, graph keys; kernels/kn_cuda_size.h: the multi-tensor AdamW
# layout, every element covered once by the kernel's own block mapping).
mks_add_test(test_gpu_step SOURCES test_gpu_step.c LIBS tr LABELS cpu TIMEOUT 60)
