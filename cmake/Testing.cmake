# SPDX-License-Identifier: Apache-2.0
# inc_gtest_groups(BINARY <target> PREFIX <ctest name prefix> LABEL <label>
#                  GROUPS <name>=<gtest filter>... [PROPERTIES <ctest properties>...])
#
# Splits one GoogleTest binary into ctest tests <prefix>_<name>, one per
# --gtest_filter, so that a group can run alone and ctest shows where a
# failure is. One process per group, not per test: the selftest and lab
# binaries build a namespace with veths and a loaded data path once per
# process, which gtest_discover_tests would repeat for every test.
#
# <prefix>_other runs every test that no group's filter names, so a new test
# that matches no filter still runs (and is seen there) instead of silently
# never running; it passes trivially only while there is none.
function(inc_gtest_groups)
  cmake_parse_arguments(A "" "BINARY;PREFIX;LABEL" "GROUPS;PROPERTIES" ${ARGN})
  set(_all "")
  set(_tests "")
  foreach(g ${A_GROUPS})
    string(FIND "${g}" "=" _eq)
    string(SUBSTRING "${g}" 0 ${_eq} _name)
    math(EXPR _start "${_eq} + 1")
    string(SUBSTRING "${g}" ${_start} -1 _filter)
    add_test(NAME ${A_PREFIX}_${_name} COMMAND ${A_BINARY} --gtest_filter=${_filter})
    list(APPEND _tests ${A_PREFIX}_${_name})
    string(APPEND _all ":${_filter}")
  endforeach()
  string(SUBSTRING "${_all}" 1 -1 _all)
  add_test(NAME ${A_PREFIX}_other COMMAND ${A_BINARY} --gtest_filter=-${_all})
  list(APPEND _tests ${A_PREFIX}_other)
  set_tests_properties(${_tests} PROPERTIES LABELS ${A_LABEL} ${A_PROPERTIES})
endfunction()

# inc_skipped_test(<ctest name> <label> <reason>)
#
# Registers a test that only reports SKIP with the reason: where a folder's
# dependency is missing at configure time its tests would otherwise vanish
# from `ctest -N` and a run would look complete without them.
function(inc_skipped_test name label reason)
  add_test(NAME ${name} COMMAND sh -c "echo 'SKIP: ${reason}'; exit 77")
  set_tests_properties(${name} PROPERTIES LABELS ${label} SKIP_RETURN_CODE 77)
endfunction()
