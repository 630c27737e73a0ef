// SPDX-License-Identifier: Apache-2.0
// Shared by the selftests that run the switch program on crafted frames from
// real ingress ports (forward_test, credit_test): a private network
// namespace for the test process with veth ports (frames: transit_frames.h).
// Port i is "<prefix><i>" with MAC 02:00:00:00:<mac_byte>:0i; its peer
// "<prefix><i>p" stays in the namespace.
#pragma once

#include <sched.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/net.h"

namespace inc::selftest {

inline int Sh(const std::string& cmd) {
  return std::system((cmd + " >/dev/null 2>&1").c_str());
}

// "" on success, else why the tests must be skipped.
inline std::string SetupVethNetns(const std::string& prefix, int ports, const std::string& mac_byte) {
  if (geteuid() != 0) return "needs root";
  struct statfs fs {};
  if (statfs("/sys/fs/bpf", &fs) != 0 || fs.f_type != 0xcafe4a11) return "bpffs not mounted at /sys/fs/bpf";
  if (unshare(CLONE_NEWNET) != 0) return std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
  for (int i = 0; i < ports; i++) {
    std::string p = prefix + std::to_string(i);
    if (Sh("ip link add " + p + " address 02:00:00:00:" + mac_byte + ":0" + std::to_string(i) +
           " type veth peer name " + p + "p") != 0 ||
        Sh("ip link set " + p + " up") != 0 || Sh("ip link set " + p + "p up") != 0)
      return "creating veth " + p + " failed";
  }
  return "";
}

// The MAC of next hop i behind a port.
inline Mac HopMac(int i) {
  return *Mac::Parse("02:00:00:00:aa:0" + std::to_string(i));
}

}  // namespace inc::selftest
