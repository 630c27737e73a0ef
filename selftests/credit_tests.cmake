# Selftests of the credit gate (bpf/credit.h) through
# inc::dp::CreditTable, and of the hold queue on live frames. Root and bpffs; otherwise exit 77 (skipped).
if(TARGET inc_datapath)
  add_executable(credit_test credit_test.cc)
  target_link_libraries(credit_test PRIVATE inc_datapath inc_common PkgConfig::LIBBPF GTest::gtest)
  inc_target_defaults(credit_test)
  add_test(NAME selftest.credit_gate COMMAND credit_test --gtest_filter=CreditTest.*)
  add_test(NAME selftest.credit_hold_queue COMMAND credit_test --gtest_filter=HoldQueueTest.*)
  set_tests_properties(selftest.credit_gate selftest.credit_hold_queue PROPERTIES LABELS selftest
                       SKIP_RETURN_CODE 77)
endif()
