// SPDX-License-Identifier: Apache-2.0
// Shared by selftest.stress_two_cpus, selftest.icrc_xdp_outputs and dp_bench:
// a private network namespace, BPF_PROG_TEST_RUN, and contribution frames for
// trees whose children are addressed by rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/frame.h"
#include "common/status.h"
#include "datapath/datapath.h"

namespace inc::bench {

// Moves the calling thread (and threads it creates later) into a fresh
// network namespace with lo up, so test ports and test_run's ingress device
// (lo) are private and vanish with the process.
Status EnterPrivateNetns();

// Creates veth pair `name` <-> `name`p (both up) in the current namespace;
// `name` gets an address 10.200.N.1/24 of its own.
Status AddVethPair(const std::string& name);

struct RunResult {
  uint32_t retval = 0;
  uint32_t duration_ns = 0;  // kernel-measured average per repetition
  std::vector<uint8_t> out;  // the frame after the program (data_out)
};

// BPF_PROG_TEST_RUN on an XDP program. out_capacity 0 skips data_out.
// live: BPF_F_TEST_XDP_LIVE_FRAMES (verdicts are carried out: XDP_TX and
// redirects really transmit; no data_out). ingress_ifindex: the port the
// frame arrives on (0: lo); the data path takes a child's frames only from
// the child's port (IngressOf).
Expected<RunResult> TestRun(int prog_fd, const uint8_t* frame, size_t len, uint32_t repeat,
                            size_t out_capacity = 4096, bool live = false, uint32_t ingress_ifindex = 0);

// A frame from child `rank` of a tree, addressed the way the tree's children
// in MakeTree are configured.
struct TreeParams {
  uint16_t tree_id = 7;
  uint32_t key = 0x5eed0007;
  uint16_t pool_size = 64;
  uint16_t max_elems = INC_MAX_PAYLOAD_BYTES / 4;
  int children = 2;
  uint8_t role = INC_ROLE_SINGLE;
  std::vector<std::string> ports;  // child r on ports[r] (a tree has one child per port)
  std::string parent_port;         // for INC_ROLE_LEAF
};

dp::TreeSpec MakeTree(const TreeParams& p);
Ipv4 ChildIp(int rank);
uint32_t ChildSwitchQpn(int rank);
Ipv4 SwitchIp();

struct Contribution {
  int rank = 0;
  uint32_t msg = 0;
  uint8_t dtype = INC_DTYPE_INT32;
  uint8_t op = INC_OP_SUM;
  uint8_t collective = INC_COLL_ALLREDUCE;
  int8_t exponent = 0;
  uint8_t flags = 0;
  const void* payload = nullptr;
  size_t payload_len = 0;
  size_t count = 0;  // elements
};

Expected<std::vector<uint8_t>> ContributionFrame(const TreeParams& tree, const Contribution& c);

// The ifindex of child `rank`'s port (tree.ports[rank]), 0 if it has none.
uint32_t IngressOf(const TreeParams& tree, int rank);

// The XDP ingress program the data path attached to `port` (queried from
// the kernel, so the test runs exactly what the port runs). The fd is owned
// by the caller's process for its lifetime.
Expected<int> AttachedProgFd(const std::string& port);
// The data path's ingress program (Datapath::ingress_prog_fd()); falls back
// to the program attached to `port`. Both must be the same program.
Expected<int> IngressProgFd(const dp::Datapath& datapath, const std::string& port);

const char* XdpActionName(uint32_t action);

}  // namespace inc::bench
