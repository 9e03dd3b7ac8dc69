# ddprun_test_code(TARGET): the target is test code, compiled at -O1 (the last -O given wins).
# A test's own code is set-up and assertions, and GoogleTest's templates are most of what the
# compiler works on: -O1 halves their compile time against -O3 (a unity batch of rendezvous
# tests: 29 s against 55). The code under test is the libraries', at Release's -O2.
function(ddprun_test_code target)
  target_compile_options(${target} PRIVATE -O1)
endfunction()

# ddprun_test(NAME LABEL SOURCES... LIBS ...): one GoogleTest binary whose tests are
# registered with ctest under LABEL (unit, integration, netns, compat, gpu; "a;b" for two).
function(ddprun_test name label)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest_main GTest::gmock)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  ddprun_test_code(${name})
  if(DDPRUN_SANITIZE)
    target_compile_definitions(${name} PRIVATE DDPRUN_SANITIZED)  # for tests that skip there
  endif()
  if(DDPRUN_SANITIZE)
    # Inherited by everything a test starts (ddprun, its workers).
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 30 PROPERTIES
      ENVIRONMENT "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/cmake/lsan.supp")
  else()
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 30)
  endif()
  # The labels are set by a script that ctest reads after the discovered tests: a list of
  # labels does not survive gtest_discover_tests' PROPERTIES.
  set(labels_file "${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake")
  file(WRITE "${labels_file}"
       "if(${name}_TESTS)\n  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${label}\")\nendif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${labels_file}")
endfunction()

# ddprun_test_runs_binaries(NAME): the paths tests/support/ddprun_paths.h reads (ddprun,
# ddprun-master, test_worker, the source tree), with those programs built before the test.
function(ddprun_test_runs_binaries name)
  target_compile_definitions(${name} PRIVATE
    DDPRUN_BIN="$<TARGET_FILE:ddprun>"
    DDPRUN_MASTER_BIN="$<TARGET_FILE:ddprun-master>"
    TEST_WORKER_BIN="$<TARGET_FILE:test_worker>"
    DDPRUN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  add_dependencies(${name} ddprun ddprun-master ddprun_network test_worker)
endfunction()
