# ICRC proofs, the two-CPU stress test and the data-path benchmark (dp_bench).
# Included from selftests/CMakeLists.txt.

set(INC_SELFTESTS_DIR ${CMAKE_CURRENT_SOURCE_DIR})

add_library(inc_icrc_test_util STATIC icrc_test_util.cc)
target_link_libraries(inc_icrc_test_util PUBLIC inc_common GTest::gtest)
target_compile_definitions(inc_icrc_test_util PRIVATE INC_SELFTESTS_DIR="${INC_SELFTESTS_DIR}")
inc_target_defaults(inc_icrc_test_util)

# (a) C++ ICRC vs the independent Python reference, (b) tshark decoding.
add_executable(icrc_test icrc_test.cc)
target_link_libraries(icrc_test PRIVATE inc_icrc_test_util GTest::gtest_main)
target_compile_definitions(icrc_test PRIVATE INC_DOCS_DIR="${CMAKE_SOURCE_DIR}/docs")
inc_target_defaults(icrc_test)
add_test(NAME selftest.icrc_python_reference
         COMMAND icrc_test --gtest_filter=IcrcPythonReference.*)
add_test(NAME selftest.icrc_tshark_decode COMMAND icrc_test --gtest_filter=IcrcTshark.*)
add_test(NAME selftest.icrc_worked_example COMMAND icrc_test --gtest_filter=IcrcWorkedExample.*)
add_test(NAME selftest.icrc_python_selftest
         COMMAND python3 ${INC_SELFTESTS_DIR}/icrc_ref.py selftest)
set_tests_properties(selftest.icrc_python_reference selftest.icrc_tshark_decode
                     selftest.icrc_python_selftest selftest.icrc_worked_example PROPERTIES LABELS selftest)
