#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# AddressSanitizer + UBSan pass over the unit tests of the code that parses
# untrusted input or does wrap-around arithmetic: the RoCEv2 frame and ICRC
# code, log lines, the settings table (environment), the config reload plan, metrics text, certificates and job
# credentials (common), the RSVP codec, credit ledger and node (credit), the ARN codec
# and detectors (arn), config validation and translation (switch), the
# libinc engine (client), and the BPF selftests' userspace side: map
# programming, the credit table and the AF_XDP hold queue (datapath). A separate build tree (${ASAN_BUILD_DIR:-build-asan});
# any sanitizer report fails the test that triggered it.
#   scripts/sanitize.sh            build and run
#   scripts/sanitize.sh -R credit  extra arguments go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
ASAN_BUILD_DIR=${ASAN_BUILD_DIR:-build-asan}
TARGETS=(common_test common_settings_test common_log_test common_daemon_test common_metrics_test common_tls_test
         credit_unit_test arn_unit_test switch_unit_test client_unit_test c_api_test
         credit_test forward_test datapath_test)
# The daemons, MPI and benchmarks are not needed for these tests.
cmake -S . -B "$ASAN_BUILD_DIR" -DCMAKE_BUILD_TYPE=Debug -DINC_SANITIZE=ON \
  -DINC_SKIP_DIRS="mpi" >/dev/null
echo "sanitize: building ${TARGETS[*]} with -fsanitize=address,undefined in $ASAN_BUILD_DIR"
cmake --build "$ASAN_BUILD_DIR" -j"${JOBS:-2}" --target "${TARGETS[@]}"
# halt_on_error makes UBSan findings fail the test instead of only printing.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$ASAN_BUILD_DIR"
# client_verbs_* need an RDMA device and are not built here.
ctest --output-on-failure --timeout 600 \
  -R '^(unit\.(common|credit_|arn_|switch_config|switch_translate|client_)|selftest\.(credit_|forward_|datapath_))' \
  -E '^unit\.client_verbs_' "$@"
