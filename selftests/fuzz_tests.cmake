# SPDX-License-Identifier: Apache-2.0
# XDP fuzz harness (label `fuzz`): mutated frames through the switch's
# ingress program with BPF_PROG_TEST_RUN, invariants after every frame and
# batch (selftests/fuzz_xdp_test.cc; docs/operations.md "Reliability").
# Root and bpffs; otherwise exit 77 (skipped). CI runs ~45 s of frames;
# INC_FUZZ_SECONDS, INC_FUZZ_FRAMES and INC_FUZZ_SEED change that.
add_executable(fuzz_xdp_test fuzz_xdp_test.cc)
target_link_libraries(fuzz_xdp_test PRIVATE inc_datapath inc_arn inc_credit inc_common PkgConfig::LIBBPF
                                            GTest::gtest)
inc_target_defaults(fuzz_xdp_test)
add_test(NAME fuzz.xdp_frames COMMAND fuzz_xdp_test)
set_tests_properties(fuzz.xdp_frames PROPERTIES LABELS fuzz TIMEOUT 180 SKIP_RETURN_CODE 77)
