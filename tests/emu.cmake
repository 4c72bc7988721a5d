# Kernels run on the CPU by tests/emu/kn_emu.h and compared with their C
# references (issue 31, item 5: kernel work checked between GPU loans):
#   test_attn_tc_emu: the pipelined tensor-core attention (GPT-2's row and the
#     grouped-query one) and the SIMT attention with the Llama tiling;
#   test_adamw_emu: the multi-tensor AdamW against one launch per tensor, bit
#     for bit, and the C reference.
# They need a C++20 compiler and the CUDA toolkit's headers (cuda_bf16.h: the
# kernels' 16-bit types on the host), no nvcc and no GPU. Left out of
# sanitizer and fuzz builds: the emulated threads are fibers switched by
# swapcontext, which ASan does not follow. Under CI the toolkit is there (make
# cuda-compile needs it): a build without the headers then registers failing
# tests instead of none.
set(MKS_EMU_TESTS test_attn_tc_emu test_adamw_emu)
if(NOT MKS_SANITIZE AND NOT MKS_FUZZ)
  find_path(MKS_CUDA_INCLUDE cuda_bf16.h HINTS ENV CUDA_HOME PATH_SUFFIXES include
            PATHS /usr/local/cuda/include /usr/local/cuda /usr/include)
  include(CheckLanguage)
  check_language(CXX)
  if(MKS_CUDA_INCLUDE AND CMAKE_CXX_COMPILER)
    enable_language(CXX)
    foreach(t ${MKS_EMU_TESTS})
      mks_add_test(${t} SOURCES ${t}.cpp LIBS kn LABELS "cpu;kernel-twin" TIMEOUT 300)
      set_target_properties(${t} PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON)
      target_include_directories(${t} PRIVATE ${MKS_CUDA_INCLUDE} ${PROJECT_SOURCE_DIR}/kernels)
      # the kernels' 16-bit pairs are type-punned 32-bit words, as on the device
      target_compile_options(${t} PRIVATE -DKN_EMU -include ${CMAKE_CURRENT_SOURCE_DIR}/emu/kn_emu.h
                                          -fno-strict-aliasing -Wno-unknown-pragmas)
    endforeach()
  elseif("$ENV{CI}" STREQUAL "true")
    foreach(t ${MKS_EMU_TESTS})
      add_test(NAME ${t} COMMAND sh -c "echo '${t}: not built: no C++ compiler or no CUDA headers (cuda_bf16.h)'; exit 1")
      set_tests_properties(${t} PROPERTIES LABELS "cpu;kernel-twin")
    endforeach()
  endif()
endif()
