# front_end_headers: no front end (tools/**) includes an *_internal.h or a
# library header that is not public (tests/cmake/front_end_headers.cmake; it
# first checks itself on a scratch tree with planted includes).
add_test(NAME front_end_headers
         COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR} -DSCRATCH=${CMAKE_CURRENT_BINARY_DIR}/front_end_headers_selfcheck
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/front_end_headers.cmake)
set_tests_properties(front_end_headers PROPERTIES LABELS "cpu")
# env_names: every environment variable the code reads is MKS_* or a
# third-party one, and only tokenizer/mks_env.c names the old MKSHARDS_* ones
# (tests/cmake/env_names.cmake; it first checks itself on a scratch tree).
add_test(NAME env_names
         COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR} -DSCRATCH=${CMAKE_CURRENT_BINARY_DIR}/env_names_selfcheck
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/env_names.cmake)
set_tests_properties(env_names PROPERTIES LABELS "cpu")
# tk_layering: no call circle between tokenizer/'s files (nm on libtk.a; the
# engine never names its loader); tests/tk_layering.py lists the circles left
# to other work and fails when one of them is gone.
add_test(NAME tk_layering COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tk_layering.py ${CMAKE_NM} $<TARGET_FILE:tk>)
set_tests_properties(tk_layering PROPERTIES LABELS "cpu")
# lib_layering: the same for dataset/ and train/ (libds, libtr_plan, libtr as
# one graph, lowest first): no call circle but the known ones the script
# lists, and no library calling up into a later one.
add_test(NAME lib_layering COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/tk_layering.py ${CMAKE_NM} $<TARGET_FILE:ds>
                                   $<TARGET_FILE:tr_plan> $<TARGET_FILE:tr>)
set_tests_properties(lib_layering PROPERTIES LABELS "cpu")
