# The Python package (tools/python, pyproject.toml): `pip install .` into a venv
# under the build folder, then pytest tests/python (tests/python/run.sh).
# python_loader_dump prints llmtrain's micro-batches for the sampler tests.
# The extension is built by pip with its own flags, so sanitizer/fuzz builds
# would only repeat the same test: registered in plain builds.
if(MKS_SANITIZE OR MKS_FUZZ)
  return()
endif()
add_executable(python_loader_dump python_loader_dump.c)
target_link_libraries(python_loader_dump PRIVATE tr m)
add_test(NAME py_package
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/python/run.sh ${PROJECT_BINARY_DIR} $<TARGET_FILE:mkshards>
                 $<TARGET_FILE:python_loader_dump> ${MKS_SHARED_DIR})
set_tests_properties(py_package PROPERTIES LABELS "cpu" SKIP_RETURN_CODE 77 TIMEOUT 900 RESOURCE_LOCK python_venv)
# Every ```sh / ```python block of README.md, in order, on the samples (tests/readme_examples.py); its Python
# blocks in py_package's venv (the lock: one pip install into it at a time). ~30 s, 18 of them llmtrain's
# 300-step example.
add_test(NAME readme_examples
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/readme_examples.sh ${PROJECT_BINARY_DIR} $<TARGET_FILE:mkshards>
                 $<TARGET_FILE:llmtrain> ${MKS_SHARED_DIR})
set_tests_properties(readme_examples PROPERTIES LABELS "cpu" SKIP_RETURN_CODE 77 TIMEOUT 900 RESOURCE_LOCK python_venv)
