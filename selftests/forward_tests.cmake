# SPDX-License-Identifier: Apache-2.0
# Selftests of the best-path forwarder (bpf/forward.h) through
# inc::dp::ForwardingTable. Root and bpffs; otherwise exit 77 (skipped).
add_executable(forward_test forward_test.cc)
target_link_libraries(forward_test PRIVATE inc_datapath inc_common PkgConfig::LIBBPF GTest::gtest)
inc_target_defaults(forward_test)
add_test(NAME selftest.forward_bpt COMMAND forward_test)
set_tests_properties(selftest.forward_bpt PROPERTIES LABELS selftest SKIP_RETURN_CODE 77)
