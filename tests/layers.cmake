# front_end_headers: no front end (tools/**) includes an *_internal.h or a
# library header that is not public (tests/cmake/front_end_headers.cmake; it
# first checks itself on a scratch tree with planted includes).
add_test(NAME front_end_headers
         COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR} -DSCRATCH=${CMAKE_CURRENT_BINARY_DIR}/front_end_headers_selfcheck
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/front_end_headers.cmake)
set_tests_properties(front_end_headers PROPERTIES LABELS "cpu")
