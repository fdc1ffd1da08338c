# Precompiled headers (cmake/pch/): two targets compile them once, every library reuses
# common.h's and every test test.h's. A reusing target must compile with the same flags as the
# one that built the header (the tests' -O1 below is on tessera_pch_test too).
option(TESSERA_PCH "Precompile the common heavy headers (std, Abseil, nlohmann/json, GoogleTest)" ON)
function(tessera_pch_targets)
  if(NOT TESSERA_PCH)
    return()
  endif()
  # GCC 12 loses, for code read from a precompiled header, that it came from a system header:
  # its -O3 middle-end false positives inside libstdc++ (std::string moves "out of bounds")
  # then surface as errors in optimized builds. They stay on without the header (-O0 builds
  # never emit them; TESSERA_PCH=OFF keeps them everywhere).
  add_compile_options($<$<CONFIG:Release,RelWithDebInfo>:-Wno-array-bounds>
                      $<$<CONFIG:Release,RelWithDebInfo>:-Wno-stringop-overflow>
                      $<$<CONFIG:Release,RelWithDebInfo>:-Wno-stringop-overread>)
  add_library(tessera_pch_common STATIC ${PROJECT_SOURCE_DIR}/cmake/pch/common.cc)
  target_link_libraries(tessera_pch_common PRIVATE absl::status absl::strings nlohmann_json::nlohmann_json)
  target_precompile_headers(tessera_pch_common PRIVATE ${PROJECT_SOURCE_DIR}/cmake/pch/common.h)
  if(TESSERA_BUILD_TESTS)
    add_library(tessera_pch_test STATIC ${PROJECT_SOURCE_DIR}/cmake/pch/test.cc)
    target_link_libraries(tessera_pch_test PRIVATE GTest::gtest GTest::gmock absl::status
                          absl::strings nlohmann_json::nlohmann_json)
    target_compile_options(tessera_pch_test PRIVATE $<$<CONFIG:Release,RelWithDebInfo>:-O1>)
    target_precompile_headers(tessera_pch_test PRIVATE ${PROJECT_SOURCE_DIR}/cmake/pch/test.h)
  endif()
endfunction()

# tessera_library(NAME SRCS ... DEPS ... [NO_PCH]): one static library per module. NO_PCH: its
# dependencies change the compile flags the precompiled header was built with (gRPC's -pthread
# defines _REENTRANT), so it compiles without it. tessera_test takes NO_PCH too.
# Dependencies are PRIVATE unless listed under PUBLIC_DEPS, so a module that
# includes a header of a module it did not declare fails to link.
function(tessera_library name)
  cmake_parse_arguments(ARG "NO_PCH" "" "SRCS;DEPS;PUBLIC_DEPS" ${ARGN})
  add_library(${name} STATIC ${ARG_SRCS})
  target_link_libraries(${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_DEPS})
  if(TESSERA_PCH AND NOT ARG_NO_PCH)
    target_precompile_headers(${name} REUSE_FROM tessera_pch_common)
  endif()
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
  cmake_parse_arguments(ARG "NO_PCH" "TIMEOUT;SPLIT" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SRCS})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} tessera_gtest_main GTest::gtest GTest::gmock)
  # Test code itself at -O1 in optimized builds: the code under test keeps the build type's -O3,
  # and a test file compiles in about two thirds of the time (CI builds everything twice).
  target_compile_options(${name} PRIVATE $<$<CONFIG:Release,RelWithDebInfo>:-O1>)
  if(TESSERA_PCH AND NOT ARG_NO_PCH)
    target_precompile_headers(${name} REUSE_FROM tessera_pch_test)
  endif()
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
