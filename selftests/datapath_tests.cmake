# Functional selftests of the XDP data path (helper A). Included from
# selftests/CMakeLists.txt. Needs root and bpffs (skips otherwise).
if(TARGET inc_datapath)
  add_executable(datapath_test datapath_test.cc)
  target_link_libraries(datapath_test PRIVATE inc_datapath inc_common PkgConfig::LIBBPF GTest::gtest)
  inc_target_defaults(datapath_test)
  add_test(NAME selftest.datapath COMMAND datapath_test)
  set_tests_properties(selftest.datapath PROPERTIES LABELS selftest)
endif()
