# Data-parallel training (issue 16): the communicator (train/comm.h).
# test_comm runs alone (world 1) in every build; with MPI (MKS_HAVE_MPI) it
# also runs under mpirun with 2, 3 and 4 ranks, and dist_kill checks that a
# rank killed (SIGKILL) or stopped (SIGSTOP) ends the whole job non-zero
# within the deadline with a message naming it. OpenMPI refuses root without
# OMPI_ALLOW_RUN_AS_ROOT*; the 2-core CI machine needs --oversubscribe; ASan
# builds do not report OpenMPI's own allocations at exit as leaks.
mks_add_test(test_comm SOURCES test_comm.c LIBS tr LABELS cpu TIMEOUT 60)
# The data-parallel policy (train/dp.h) the CPU and the CUDA backend share,
# and the layout that keeps it one: the policy's knobs read in dp.c alone,
# no #if in the dispatcher, each engine's library in its own file.
mks_add_test(test_dp SOURCES test_dp.c LIBS tr LABELS cpu TIMEOUT 30)
add_test(NAME dist_layout COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/dist_layout.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(dist_layout PROPERTIES LABELS cpu TIMEOUT 30)
if(MKS_HAVE_MPI)
  set(MKS_MPI_TEST_ENV
      OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
      OMPI_MCA_btl_vader_single_copy_mechanism=none ASAN_OPTIONS=detect_leaks=0 MKS_COMM_TIMEOUT=30)
  foreach(np 2 3 4)
    add_test(NAME test_comm_np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} --oversubscribe $<TARGET_FILE:test_comm>)
    set_tests_properties(test_comm_np${np} PROPERTIES LABELS cpu TIMEOUT 120 ENVIRONMENT "${MKS_MPI_TEST_ENV}")
  endforeach()
  add_test(NAME dist_kill COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/dist_kill.sh ${MPIEXEC_EXECUTABLE}
                                  $<TARGET_FILE:test_comm>)
  set_tests_properties(dist_kill PROPERTIES LABELS cpu TIMEOUT 120 ENVIRONMENT "${MKS_MPI_TEST_ENV}")
endif()
# The NCCL engine on the GPU (label gpu; exits 77 without a GPU or NCCL):
# world 1 always, under mpirun with every GPU of the host when MPI is built.
if(MKS_ENABLE_CUDA)
  mks_add_test(test_comm_nccl_gpu SOURCES test_comm_nccl_gpu.cu LIBS tr_cuda LABELS gpu TIMEOUT 120)
  set_target_properties(test_comm_nccl_gpu PROPERTIES COMPILE_OPTIONS "" CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  target_compile_options(test_comm_nccl_gpu PRIVATE -Xcompiler=-Wall,-Wextra -Wno-deprecated-gpu-targets)
  if(MKS_HAVE_MPI)
    # 2 ranks, one GPU each (77 on a host with fewer GPUs)
    add_test(NAME test_comm_nccl_gpu_np2
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe $<TARGET_FILE:test_comm_nccl_gpu>)
    set_tests_properties(test_comm_nccl_gpu_np2 PROPERTIES LABELS gpu TIMEOUT 120 SKIP_RETURN_CODE 77
                         ENVIRONMENT "${MKS_MPI_TEST_ENV}")
  endif()
endif()
# `mkshards build --part auto`: K/N from the launcher's environment.
mks_add_test(test_dist_part SOURCES test_dist_part.c LIBS ds tk LABELS cpu TIMEOUT 30)
# The per-rank plan: llmtrain --plan --world N --zero 0|1.
add_test(NAME dist_plan COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/dist_plan.sh $<TARGET_FILE:llmtrain>)
set_tests_properties(dist_plan PROPERTIES LABELS cpu TIMEOUT 60)
if(MKS_HAVE_MPI)
  add_test(NAME dist_part_auto COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/dist_part_auto.sh ${MPIEXEC_EXECUTABLE}
                                       $<TARGET_FILE:mkshards> ${PROJECT_SOURCE_DIR})
  set_tests_properties(dist_part_auto PROPERTIES LABELS cpu TIMEOUT 120 ENVIRONMENT "${MKS_MPI_TEST_ENV}")
endif()
# Data-parallel llmtrain under mpirun (tiny model on the golden shard set).
if(MKS_HAVE_MPI)
  add_test(NAME dist_train COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/dist_train.sh ${MPIEXEC_EXECUTABLE}
                                   $<TARGET_FILE:llmtrain> ${CMAKE_CURRENT_SOURCE_DIR}/data/golden_train/inputs/concat)
  set_tests_properties(dist_train PROPERTIES LABELS cpu TIMEOUT 240 ENVIRONMENT "${MKS_MPI_TEST_ENV}")
  add_test(NAME dist_train_resume COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/dist_train.sh ${MPIEXEC_EXECUTABLE}
                                          $<TARGET_FILE:llmtrain> ${CMAKE_CURRENT_SOURCE_DIR}/data/golden_train/inputs/concat resume)
  set_tests_properties(dist_train_resume PROPERTIES LABELS cpu TIMEOUT 240 ENVIRONMENT "${MKS_MPI_TEST_ENV}")
  add_test(NAME dist_train_llama COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/dist_train.sh ${MPIEXEC_EXECUTABLE}
                                         $<TARGET_FILE:llmtrain> ${CMAKE_CURRENT_SOURCE_DIR}/data/golden_train/inputs/concat llama)
  set_tests_properties(dist_train_llama PROPERTIES LABELS cpu TIMEOUT 240 ENVIRONMENT "${MKS_MPI_TEST_ENV}")
  add_test(NAME dist_train_codes COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/dist_train.sh ${MPIEXEC_EXECUTABLE}
                                         $<TARGET_FILE:llmtrain> ${CMAKE_CURRENT_SOURCE_DIR}/data/golden_train/inputs/concat codes)
  set_tests_properties(dist_train_codes PROPERTIES LABELS cpu TIMEOUT 240 ENVIRONMENT "${MKS_MPI_TEST_ENV}")
  add_test(NAME dist_train_fail COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/dist_train.sh ${MPIEXEC_EXECUTABLE}
                                        $<TARGET_FILE:llmtrain> ${CMAKE_CURRENT_SOURCE_DIR}/data/golden_train/inputs/concat fail)
  set_tests_properties(dist_train_fail PROPERTIES LABELS cpu TIMEOUT 240 ENVIRONMENT "${MKS_MPI_TEST_ENV}")
endif()
