# test_adamw_emu: the AdamW kernels (kernels/kn_adamw.cuh: the multi-tensor
# one against one launch per tensor, bit for bit, and the C reference) run on
# the CPU by tests/emu/kn_emu.h (issue 31 items 3 and 5). Same conditions as
# test_attn_tc_emu (tests/emu.cmake): a C++20 compiler and the CUDA headers,
# no nvcc, no GPU; not under sanitizers (fibers).
if(NOT MKS_SANITIZE AND NOT MKS_FUZZ)
  find_path(MKS_CUDA_INCLUDE cuda_bf16.h HINTS ENV CUDA_HOME PATH_SUFFIXES include
            PATHS /usr/local/cuda/include /usr/local/cuda /usr/include)
  include(CheckLanguage)
  check_language(CXX)
  if(MKS_CUDA_INCLUDE AND CMAKE_CXX_COMPILER)
    enable_language(CXX)
    mks_add_test(test_adamw_emu SOURCES test_adamw_emu.cpp LIBS kn LABELS "cpu;kernel-twin" TIMEOUT 120)
    set_target_properties(test_adamw_emu PROPERTIES CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON)
    target_include_directories(test_adamw_emu PRIVATE ${MKS_CUDA_INCLUDE} ${PROJECT_SOURCE_DIR}/kernels)
    target_compile_options(test_adamw_emu PRIVATE -DKN_EMU -include ${CMAKE_CURRENT_SOURCE_DIR}/emu/kn_emu.h
                                                  -fno-strict-aliasing -Wno-unknown-pragmas)
  elseif("$ENV{CI}" STREQUAL "true")
    add_test(NAME test_adamw_emu COMMAND sh -c
             "echo 'test_adamw_emu: not built: no C++ compiler or no CUDA headers (cuda_bf16.h)'; exit 1")
    set_tests_properties(test_adamw_emu PROPERTIES LABELS "cpu;kernel-twin")
  endif()
endif()
