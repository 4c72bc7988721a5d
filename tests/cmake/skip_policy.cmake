# Included by tests/CMakeLists.txt (and by tests/python/test_ci.py's scratch
# project, which checks the policy end to end). Not a test list: tests/*.cmake
# are globbed as test lists, this folder is not.

# mks_allow_skip(TEST "why"): the one way a test may still skip (exit 77) in
# CI, for a reason that holds on every CI machine (a measurement a sanitizer
# makes meaningless, ...). Missing data (../shared, fixtures) or a missing peer
# is never such a reason: under CI those tests must run.
function(mks_allow_skip name reason)
  set_tests_properties(${name} PROPERTIES MKS_SKIP_REASON "${reason}")
endfunction()

# Strict mode (CI=true in the environment when CMake runs, as in .ci/run, or
# -DMKS_TESTS_STRICT=ON): exit 77 is a failure, not a skip, for every test
# except the GPU ones (CI has no GPU) and those given a reason above, so a
# machine without ../shared or a peer cannot go green without the golden and
# parity suites. tests/ctest_report.sh prints each skip and its reason.
macro(mks_apply_skip_policy)
option(MKS_TESTS_STRICT "a test exiting 77 fails unless labelled gpu or mks_allow_skip'd" OFF)
if(MKS_TESTS_STRICT OR "$ENV{CI}" STREQUAL "true")
  get_property(mks_all_tests DIRECTORY PROPERTY TESTS)
  set(mks_strict_n 0)
  foreach(t ${mks_all_tests})
    get_test_property(${t} LABELS labels)
    get_test_property(${t} MKS_SKIP_REASON reason)
    if(NOT "gpu" IN_LIST labels AND NOT reason)
      set_property(TEST ${t} PROPERTY SKIP_RETURN_CODE)
      math(EXPR mks_strict_n "${mks_strict_n} + 1")
    endif()
  endforeach()
  message(STATUS "tests: strict mode (CI): ${mks_strict_n} tests fail instead of skipping")
endif()
endmacro()
