# The lm head in row chunks (issue 31 item 3; train/gpu_lmhead.h): the switch, the chunk table and the
# planner's logits rows (plain C, tr_plan), and those rows against the GPU models' carves (host code of
# tr_cuda: CUDA builds only, no GPU needed). Both label cpu.
mks_add_test(test_lmhead_chunk SOURCES test_lmhead_chunk.c LIBS tr_plan LABELS cpu TIMEOUT 60)
if(MKS_ENABLE_CUDA)
  mks_add_test(test_gpu_plan_carve SOURCES test_gpu_plan_carve.c LIBS tr LABELS cpu TIMEOUT 60)
endif()
