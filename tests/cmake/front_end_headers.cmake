# front_end_headers.cmake - cmake -DROOT=<source root> [-DSCRATCH=<dir>] -P this
#
# Front ends (everything under tools/: the mkshards CLI, llmtrain, the Python
# module, the benchmarks) use the libraries only through their public
# headers (docs/architecture.md "Rules a newcomer can rely on"). Fails,
# naming file, line and header, when a C/C++/CUDA file under tools/
# includes a header that is
#   - named *_internal.h (wherever it lives), or
#   - a header of a library folder (tokenizer/, dataset/, train/, kernels/,
#     their subfolders included) that is not in MKS_PUBLIC_HEADERS below.
# A library that publishes a new header adds it to MKS_PUBLIC_HEADERS.
# Between the libraries too: no file of one library folder includes another
# library's *_internal.h or *.cuh (kernels' kn_cuda_common.cuh stays in
# kernels/; train/*.cu use the published kn_cuda_check.h).
#
# With -DSCRATCH=<dir> it first checks itself: it writes a tree there with a
# front end that includes a private header (dataset/build_internal.h), one
# that includes a library header not published (train/dist.h) and one that
# includes only public ones, and fails unless exactly the first two are
# reported (so the check cannot pass by finding nothing).
cmake_minimum_required(VERSION 3.22)

set(MKS_LIBRARY_DIRS tokenizer dataset train kernels)
set(MKS_PUBLIC_HEADERS
    tk.h tk_train.h mks_env.h                        # tokenizer (mks_env.h: the MKS_* variables)
    ds.h ds_shard.h ds_chat.h ds_columnar.h          # dataset (ds_columnar.h: Parquet / Arrow inputs)
    ds_arrow_json.h                                  # dataset: an Arrow row as a chat record (the Python module)
    mks_common.h                                     # the common layer (dataset/common)
    tr.h                                             # train
    kn.h kn_cuda.h kn_cuda_check.h kn_cuda_size.h)   # kernels

# mks_scan_front_ends(<root> <out var>): the violations, one "file:line: header (why)" each.
function(mks_scan_front_ends root out)
  set(lib_headers "")
  foreach(d ${MKS_LIBRARY_DIRS})
    file(GLOB_RECURSE hs ${root}/${d}/*.h ${root}/${d}/*.cuh ${root}/${d}/*.hpp)
    foreach(h ${hs})
      get_filename_component(n "${h}" NAME)
      list(APPEND lib_headers "${n}")
    endforeach()
  endforeach()
  file(GLOB_RECURSE srcs ${root}/tools/*.c ${root}/tools/*.h ${root}/tools/*.cc ${root}/tools/*.cpp
       ${root}/tools/*.cu ${root}/tools/*.cuh)
  set(found "")
  foreach(f ${srcs})
    file(STRINGS "${f}" lines)
    set(ln 0)
    foreach(l IN LISTS lines)
      math(EXPR ln "${ln} + 1")
      if(NOT l MATCHES "^[ \t]*#[ \t]*include[ \t]*[\"<]([^\">]+)[\">]")
        continue()
      endif()
      set(inc "${CMAKE_MATCH_1}") # before the next MATCHES resets it
      get_filename_component(n "${inc}" NAME)
      set(why "")
      if(n MATCHES "_internal\\.h$")
        set(why "an *_internal.h header")
      elseif(n IN_LIST lib_headers AND NOT n IN_LIST MKS_PUBLIC_HEADERS)
        set(why "a library header that is not public")
      endif()
      if(why)
        file(RELATIVE_PATH rel "${root}" "${f}")
        list(APPEND found "${rel}:${ln}: ${inc} (${why})")
      endif()
    endforeach()
  endforeach()
  # between the libraries
  foreach(d ${MKS_LIBRARY_DIRS})
    file(GLOB_RECURSE hs ${root}/${d}/*_internal.h ${root}/${d}/*.cuh)
    set(private "")
    foreach(h ${hs})
      get_filename_component(n "${h}" NAME)
      list(APPEND private "${n}")
    endforeach()
    foreach(o ${MKS_LIBRARY_DIRS})
      if(o STREQUAL d OR NOT private)
        continue()
      endif()
      file(GLOB_RECURSE srcs ${root}/${o}/*.c ${root}/${o}/*.h ${root}/${o}/*.cu ${root}/${o}/*.cuh)
      foreach(f ${srcs})
        file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include")
        foreach(l IN LISTS lines)
          if(l MATCHES "^[ \t]*#[ \t]*include[ \t]*[\"<]([^\">]+)[\">]")
            set(inc "${CMAKE_MATCH_1}")
            get_filename_component(n "${inc}" NAME)
            if(n IN_LIST private)
              file(RELATIVE_PATH rel "${root}" "${f}")
              list(APPEND found "${rel}: ${inc} (private to ${d}/)")
            endif()
          endif()
        endforeach()
      endforeach()
    endforeach()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

if(SCRATCH)
  file(REMOVE_RECURSE "${SCRATCH}")
  file(WRITE "${SCRATCH}/dataset/build_internal.h" "/* private */\n")
  file(WRITE "${SCRATCH}/dataset/ds.h" "/* public */\n")
  file(WRITE "${SCRATCH}/train/dist.h" "/* private, no _internal in its name */\n")
  file(WRITE "${SCRATCH}/train/tr.h" "/* public */\n")
  file(WRITE "${SCRATCH}/tools/cmd_bad.c" "#include <stdio.h>\n#include \"ds.h\"\n  #  include \"build_internal.h\"\n")
  file(WRITE "${SCRATCH}/tools/sub/bad2.c" "#include \"../../train/dist.h\"\n")
  file(WRITE "${SCRATCH}/kernels/kn_cuda_common.cuh" "/* private to kernels */\n")
  file(WRITE "${SCRATCH}/train/gpu.cu" "#include \"kn_cuda_common.cuh\"\n")
  file(WRITE "${SCRATCH}/tools/good.c" "#include \"tr.h\"\n#include \"ds.h\"\n#include \"cli.h\"\n/* #include \"dist.h\" in a comment */\n")
  mks_scan_front_ends("${SCRATCH}" self)
  list(LENGTH self n_self)
  if(NOT n_self EQUAL 3 OR NOT self MATCHES "tools/cmd_bad.c:3: build_internal.h"
     OR NOT self MATCHES "tools/sub/bad2.c:1: ../../train/dist.h"
     OR NOT self MATCHES "train/gpu.cu: kn_cuda_common.cuh \\(private to kernels/\\)")
    message(FATAL_ERROR "front_end_headers self-check: want cmd_bad.c:3, sub/bad2.c:1 and train/gpu.cu reported, got: ${self}")
  endif()
  file(REMOVE_RECURSE "${SCRATCH}")
  message(STATUS "self-check: the three planted includes reported")
endif()

mks_scan_front_ends("${ROOT}" found)
if(found)
  string(REPLACE ";" "\n  " txt "${found}")
  message(FATAL_ERROR "private headers included outside their library (front ends may use: ${MKS_PUBLIC_HEADERS}):\n  ${txt}")
endif()
message(STATUS "front ends include only public library headers; no library includes another's private ones")
