# tessera_library(NAME SRCS ... DEPS ...): one static library per module.
# Dependencies are PRIVATE unless listed under PUBLIC_DEPS, so a module that
# includes a header of a module it did not declare fails to link.
function(tessera_library name)
  cmake_parse_arguments(ARG "" "" "SRCS;DEPS;PUBLIC_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  target_link_libraries(${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_DEPS})
endfunction()

# tessera_test(NAME SRCS ... DEPS ... [SPLIT PATTERN] [LABELS ...] [TIMEOUT S]): a GoogleTest
# binary registered with CTest. Its main (src/common/testing/gtest_main.cc) exits 77 when a test
# was skipped, which ctest reports as skipped. SPLIT: the tests matching the gtest filter PATTERN
# (those that may skip, e.g. "*SharedTrace*" when ../shared/traces is absent) run as a ctest
# entry of their own, NAME_split, so their skip does not hide the binary's other tests.
function(tessera_test name)
  if(NOT TESSERA_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(ARG "" "TIMEOUT;SPLIT" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} tessera_gtest_main GTest::gtest GTest::gmock)
  set(entries ${name})
  if(ARG_SPLIT)
    add_test(NAME ${name} COMMAND ${name} --gtest_filter=-${ARG_SPLIT})
    add_test(NAME ${name}_split COMMAND ${name} --gtest_filter=${ARG_SPLIT})
    list(APPEND entries ${name}_split)
  else()
    add_test(NAME ${name} COMMAND ${name})
  endif()
  set(timeout 300)
  if(ARG_TIMEOUT)
    set(timeout ${ARG_TIMEOUT})
  endif()
  set_tests_properties(${entries} PROPERTIES TIMEOUT ${timeout} SKIP_RETURN_CODE 77
    ENVIRONMENT "TESSERA_SHARED_DIR=${PROJECT_SOURCE_DIR}/../shared;TESSERA_BIN=$<TARGET_FILE:tessera>")
  if(ARG_LABELS)
    set_tests_properties(${entries} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()
