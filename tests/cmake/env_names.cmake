# env_names.cmake - cmake -DROOT=<source root> [-DSCRATCH=<dir>] -P this
#
# One prefix (tokenizer/mks_env.h): every environment variable the code reads
# by a literal name (getenv, mks_getenv and the launcher/option helpers
# env_on, env_int, env_first_int, env_u64, kn_opt_in) in tokenizer/,
# dataset/, train/, kernels/ and tools/ is MKS_* or a third-party one
# (MKS_THIRD_PARTY below); and no source but mks_env.c names an old
# MKSHARDS_* variable (the old names are read there only, with the warning).
# Fails naming the file and the variable.
#
# With -DSCRATCH=<dir> it first checks itself on a scratch tree holding
# getenv("MKSHARDS_FOO"), mks_getenv("FOO_BAR") and two accepted reads, and
# fails unless exactly the first two are reported.
cmake_minimum_required(VERSION 3.22)

set(MKS_THIRD_PARTY_PREFIXES OMP_ TIKTOKEN_ DATA_GYM_ XDG_ SLURM_ OMPI_ PMI_ PMIX_ MPI_ CUDA_ NCCL_)
set(MKS_THIRD_PARTY_NAMES TMPDIR HOME)

function(mks_scan_env root out)
  set(found "")
  file(GLOB_RECURSE srcs ${root}/tokenizer/*.c ${root}/tokenizer/*.h ${root}/dataset/*.c ${root}/dataset/*.h
       ${root}/train/*.c ${root}/train/*.h ${root}/train/*.cu ${root}/kernels/*.c ${root}/kernels/*.h
       ${root}/kernels/*.cu ${root}/kernels/*.cuh ${root}/tools/*.c ${root}/tools/*.h)
  foreach(f ${srcs})
    file(RELATIVE_PATH rel "${root}" "${f}")
    file(READ "${f}" txt)
    string(REGEX MATCHALL "(getenv|mks_getenv|env_on|env_int|env_first_int|env_u64|kn_opt_in)\\([^\")]*\"[A-Za-z_][A-Za-z0-9_]*\""
           reads "${txt}")
    foreach(r IN LISTS reads)
      string(REGEX REPLACE ".*\"([^\"]*)\"$" "\\1" name "${r}")
      set(ok 0)
      if(name MATCHES "^MKS_" OR name IN_LIST MKS_THIRD_PARTY_NAMES)
        set(ok 1)
      endif()
      foreach(p ${MKS_THIRD_PARTY_PREFIXES})
        string(FIND "${name}" "${p}" at)
        if(at EQUAL 0)
          set(ok 1)
        endif()
      endforeach()
      if(NOT ok)
        list(APPEND found "${rel}: reads ${name} (not MKS_*, not a third-party name)")
      endif()
    endforeach()
    if(NOT rel MATCHES "^tokenizer/mks_env\\.[ch]$" AND txt MATCHES "MKSHARDS_[A-Z]")
      list(APPEND found "${rel}: names an old MKSHARDS_* variable (read them through mks_getenv only)")
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

if(SCRATCH)
  file(REMOVE_RECURSE "${SCRATCH}")
  file(WRITE "${SCRATCH}/dataset/a.c" "const char *a(void) { return getenv(\"MKSHARDS_FOO\"); }\n")
  file(WRITE "${SCRATCH}/train/b.c" "int b(void) { return !!mks_getenv(\"FOO_BAR\") + !!getenv(\"SLURM_PROCID\"); }\n")
  file(WRITE "${SCRATCH}/tools/c.c" "int c(void) { return env_on(\"MKS_FOO\"); }\n")
  mks_scan_env("${SCRATCH}" self)
  list(LENGTH self n_self)
  if(NOT n_self EQUAL 3 OR NOT self MATCHES "dataset/a.c: reads MKSHARDS_FOO" OR NOT self MATCHES "train/b.c: reads FOO_BAR"
     OR NOT self MATCHES "dataset/a.c: names an old")
    message(FATAL_ERROR "env_names self-check: want MKSHARDS_FOO (twice) and FOO_BAR reported, got: ${self}")
  endif()
  file(REMOVE_RECURSE "${SCRATCH}")
  message(STATUS "self-check: the planted reads reported")
endif()

mks_scan_env("${ROOT}" found)
if(found)
  string(REPLACE ";" "\n  " txt "${found}")
  message(FATAL_ERROR "environment variables outside the MKS_ prefix:\n  ${txt}")
endif()
message(STATUS "every project environment variable is MKS_*")
