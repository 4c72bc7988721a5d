# test_attn_tc_emu: the pipelined tensor-core attention kernels
# (kernels/kn_attention_tc_pipe.cu) run on the CPU by tests/emu/kn_emu.h and
# compared with the C references: GPT-2's row and the grouped-query one (issue
# 31, item 5: kernel work checked on the CPU between GPU loans). Needs a C++20
# compiler and the CUDA toolkit's headers (cuda_bf16.h: the kernels' bf16 type
# on the host), no nvcc and no GPU. Left out of sanitizer and fuzz builds: the
# emulated threads are fibers switched by swapcontext, which ASan does not
# follow. Under CI the toolkit is there (make cuda-compile needs it): a build
# without the headers then registers a failing test instead of none.
if(NOT MKS_SANITIZE AND NOT MKS_FUZZ)
  find_path(MKS_CUDA_INCLUDE cuda_bf16.h HINTS ENV CUDA_HOME PATH_SUFFIXES include
            PATHS /usr/local/cuda/include /usr/local/cuda /usr/include)
  include(CheckLanguage)
  check_language(CXX)
  if(MKS_CUDA_INCLUDE AND CMAKE_CXX_COMPILER)
    enable_language(CXX)
    mks_add_test(test_attn_tc_emu SOURCES test_attn_tc_emu.cpp LIBS kn LABELS "cpu;kernel-twin" TIMEOUT 300)
    set_target_properties(test_attn_tc_emu PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON)
    target_include_directories(test_attn_tc_emu PRIVATE ${MKS_CUDA_INCLUDE} ${PROJECT_SOURCE_DIR}/kernels)
    # the kernels' bf16 pairs are type-punned 32-bit words, as on the device
    target_compile_options(test_attn_tc_emu PRIVATE -DKN_EMU -include ${CMAKE_CURRENT_SOURCE_DIR}/emu/kn_emu.h
                                                    -fno-strict-aliasing -Wno-unknown-pragmas)
  elseif("$ENV{CI}" STREQUAL "true")
    add_test(NAME test_attn_tc_emu COMMAND sh -c
             "echo 'test_attn_tc_emu: not built: no C++ compiler or no CUDA headers (cuda_bf16.h)'; exit 1")
    set_tests_properties(test_attn_tc_emu PROPERTIES LABELS "cpu;kernel-twin")
  endif()
endif()
