# SPDX-License-Identifier: Apache-2.0
# Functional selftests of the XDP data path (bpf/inc_switch.bpf.c through
# inc_datapath). Included from selftests/CMakeLists.txt. They need root and
# bpffs and run in a private network namespace of their own; without BPF
# they exit 77, which ctest reports as skipped.
add_executable(datapath_test datapath/main.cc datapath/aggregate_test.cc datapath/replicate_test.cc
                             datapath/parse_test.cc datapath/two_level_test.cc datapath/control_test.cc
                             datapath/certificate_test.cc)
target_link_libraries(datapath_test PRIVATE inc_datapath inc_common PkgConfig::LIBBPF GTest::gtest)
inc_target_defaults(datapath_test)
inc_gtest_groups(
  BINARY datapath_test PREFIX selftest.datapath LABEL selftest PROPERTIES SKIP_RETURN_CODE 77
  GROUPS "collectives=Datapath/CollectiveTest.*:Datapath/LaneTailTest.*"
         "tree_sizes=Datapath/SizeTest.*"
         "drop_reasons=*EveryDropReason*:*LeafDropsResult*:*NonIncTraffic*"
         "port_binding=*PortBinding*"
         "two_level=*TwoLevel*:*SingleLevelLeaf*"
         "slot_reuse_wrap=*SlotReuse*"
         "icrc=*Icrc*:*ResultAndRetransmitCopiesAreByteExact*"
         "live_broadcast=*LiveBroadcast*"
         "certificate=*Certificate*"
         "control=*ConfigureTree*:*Reconfigure*:*Restarted*:*StatsCount*")
