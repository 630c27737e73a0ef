# SPDX-License-Identifier: Apache-2.0
# ICRC proofs, the two-CPU stress test and the data-path harness they share
# with the data-path benchmark (bench/datapath/dp_bench.cc).
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
inc_gtest_groups(BINARY icrc_test PREFIX selftest.icrc LABEL selftest
                 GROUPS "python_reference=IcrcPythonReference.*" "tshark_decode=IcrcTshark.*"
                        "worked_example=IcrcWorkedExample.*")
add_test(NAME selftest.icrc_python_selftest
         COMMAND python3 ${INC_SELFTESTS_DIR}/icrc_ref.py selftest)
set_tests_properties(selftest.icrc_python_selftest PROPERTIES LABELS selftest)

# Everything below drives the real data path (inc_datapath from
# userspace/datapath) through BPF_PROG_TEST_RUN; it needs root and bpffs.
add_library(inc_dp_harness STATIC dp_harness.cc)
target_include_directories(inc_dp_harness PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(inc_dp_harness PUBLIC inc_datapath inc_common PkgConfig::LIBBPF)
inc_target_defaults(inc_dp_harness)

# (c) ICRC of frames the XDP program emits, checked by the Python reference.
add_executable(icrc_xdp_test icrc_xdp_test.cc)
target_link_libraries(icrc_xdp_test PRIVATE inc_dp_harness inc_icrc_test_util GTest::gtest_main)
inc_target_defaults(icrc_xdp_test)
add_test(NAME selftest.icrc_xdp_outputs COMMAND icrc_xdp_test)

add_executable(stress_test stress_test.cc)
target_link_libraries(stress_test PRIVATE inc_dp_harness GTest::gtest_main Threads::Threads)
inc_target_defaults(stress_test)
# overflow_flag_order: OVERFLOW describes the sum, whatever the arrival
# order of partial sums that overflow on the way (see the test).
inc_gtest_groups(BINARY stress_test PREFIX selftest.stress LABEL selftest
                 GROUPS "two_cpus=StressTwoCpus.*" "overflow_flag_order=OverflowFlag.*")
set_tests_properties(selftest.icrc_xdp_outputs PROPERTIES LABELS selftest)

