# SPDX-License-Identifier: Apache-2.0
# Selftests of the credit gate (bpf/credit.h) through
# inc::dp::CreditTable, and of the hold queue on live frames. Root and bpffs; otherwise exit 77 (skipped).
add_executable(credit_test credit_test.cc)
target_link_libraries(credit_test PRIVATE inc_datapath inc_common PkgConfig::LIBBPF GTest::gtest)
inc_target_defaults(credit_test)
inc_gtest_groups(BINARY credit_test PREFIX selftest.credit LABEL selftest PROPERTIES SKIP_RETURN_CODE 77
                 GROUPS "gate=CreditTest.*" "hold_queue=HoldQueueTest.*")
