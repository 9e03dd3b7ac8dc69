# ddprun_test(NAME LABEL SOURCES... LIBS ...): one GoogleTest binary whose tests are
# registered with ctest under LABEL (unit, integration, netns, compat, gpu; "a;b" for two).
function(ddprun_test name label)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest_main GTest::gmock)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
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
