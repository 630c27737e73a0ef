#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian 12 packages incin builds and tests with; installs only
# what is missing, so a second run does nothing. Needs root.
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config clang llvm clang-format libclang-rt-dev shellcheck
  libbpf-dev bpftool linux-libc-dev
  # libxdp: worker programs join another program's multi-program dispatcher;
  # xdp-loader for lab.xdp_coexist (docs/operations.md).
  libxdp-dev xdp-tools
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libssl-dev openssl
  libcli11-dev libgtest-dev libgmock-dev libsystemd-dev libcpp-httplib-dev libmicrohttpd-dev libgnutls28-dev libsqlite3-dev
  libibverbs-dev rdma-core ibverbs-utils
  iproute2 ethtool procps python3 tshark systemd
  openmpi-bin libopenmpi-dev libgloo-dev gnuplot-nox
  qemu-system-x86 busybox-static kmod xz-utils zstd perftest
  libnetconf2-dev libyang2-dev libssh-dev libyang-tools python3-ncclient
  python3-torch libtorch-dev python3-dev pybind11-dev
  # Debian packages (packaging/, lab.packages, lab.systemd_units): man pages
  # from --help, lintian on the .debs, CPack's file(1) and dpkg-dev tools,
  # capsh to read the daemons' capabilities in the systemd guest.
  help2man lintian file dpkg-dev adduser libcap2-bin
  # promtool, to check the Prometheus rules (packaging/prometheus) and the
  # daemons' /metrics (unit.prometheus_rules, lab.metrics); its server is
  # not started here (no init system runs it in a container).
  prometheus
)
read -r -a EXTRA_PACKAGES <<<"${INC_EXTRA_PACKAGES:-}"
PACKAGES+=("${EXTRA_PACKAGES[@]}")

missing=()
for p in "${PACKAGES[@]}"; do
  grep -q "install ok installed" <<<"$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "deps: done"
