# SPDX-License-Identifier: Apache-2.0
# Selftests of the member-side transport program (bpf/member_io.bpf.c,
# libinc's xdp transport). Root; otherwise exit 77 (skipped).
add_executable(member_io_test member_io_test.cc)
target_link_libraries(member_io_test PRIVATE member_io_skel inc_client inc_common PkgConfig::LIBBPF GTest::gtest)
inc_target_defaults(member_io_test)
add_test(NAME selftest.member_io COMMAND member_io_test)
set_tests_properties(selftest.member_io PROPERTIES LABELS selftest SKIP_RETURN_CODE 77)
