// SPDX-License-Identifier: Apache-2.0
// The switch data path as the agent sees it: load or re-adopt the XDP
// programs and their pinned maps, attach them to ports, program trees, read
// counters. Everything BPF-specific (skeletons, map layouts, pinning) stays
// behind this interface; incswitchd, the selftests and the benchmarks use it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/abi/tree.h"
#include "common/net.h"
#include "common/status.h"

namespace inc::dp {

// A peer of the switch in one tree (domain form of struct inc_endpoint).
struct Endpoint {
  std::string port;  // switch interface name that reaches the peer
  Mac peer_mac;
  Ipv4 peer_ip;
  uint32_t peer_qpn = 0;    // DestQP of frames toward the peer
  uint32_t switch_qpn = 0;  // DestQP the peer's frames carry toward us
  uint32_t rkey = 0;
  uint64_t va_base = 0;
  uint32_t slot_stride = 0;
  uint16_t member_lo = 0;  // members [lo, hi) reachable through this peer
  uint16_t member_hi = 0;
  bool operator==(const Endpoint& o) const;
};

// What this switch holds for one tree (domain form of struct inc_tree_cfg).
struct TreeSpec {
  uint16_t tree_id = 0;
  uint32_t key = 0;
  uint8_t role = INC_ROLE_SINGLE;  // enum inc_role
  uint16_t pool_size = 0;
  uint16_t max_elems = INC_DEFAULT_ELEMS_PER_PACKET;
  uint32_t slot_base = 0;
  uint16_t dtype_mask = 0;  // INC_BIT(enum inc_dtype); 0 = every supported
  uint8_t op_mask = 0;
  uint8_t coll_mask = 0;
  std::vector<Endpoint> children;  // index = rank at this switch
  std::optional<Endpoint> parent;  // for INC_ROLE_LEAF
  uint8_t rank_at_parent = 0;
  bool operator==(const TreeSpec& o) const;
};

struct Options {
  std::string switch_name;
  std::string pin_root = "/sys/fs/bpf/incin";  // maps pinned at pin_root/switch_name/
  uint32_t slot_capacity = 4096;               // slots (two copies each)
  bool verify_icrc = true;
  bool generic_xdp = false;             // SKB mode instead of native
  uint8_t ip_ttl = INC_IP_TTL_DEFAULT;  // of frames the switch sends
  uint8_t ip_tos = INC_IP_TOS_DEFAULT;
};

struct PortState {
  std::string name;
  uint32_t ifindex = 0;
  Mac mac;
  Ipv4 ip;
  bool attached = false;
};

struct Counters {
  uint64_t rx_packets = 0, rx_bytes = 0, tx_packets = 0, tx_bytes = 0;
  uint64_t completions = 0, retransmissions = 0, drops = 0;
};

struct Stats {
  std::map<std::string, uint64_t> global;  // enum inc_stat names, summed over CPUs
  std::map<std::string, uint64_t> drops;   // enum inc_drop_reason names
  std::map<uint16_t, Counters> trees;
  std::map<std::pair<uint16_t, uint16_t>, Counters> members;  // (tree, rank)
};

struct Capabilities {
  uint32_t max_children = INC_MAX_CHILDREN;
  uint32_t max_trees = INC_MAX_TREES - 1;
  uint32_t slot_capacity = 0;
  uint32_t max_elems_per_packet = INC_MAX_PAYLOAD_BYTES / 4;
  uint16_t dtype_mask = 0;
  uint8_t op_mask = 0;
  uint8_t coll_mask = 0;
  bool verify_icrc = false;
};

const char* DropReasonName(int reason);  // enum inc_drop_reason -> "bad_key"
const char* StatName(int stat);          // enum inc_stat -> "rx_packets"

class Datapath {
 public:
  virtual ~Datapath() = default;

  // Loads the programs and creates pinned maps, or re-adopts the pinned maps
  // of a previous agent for options.switch_name (live trees survive).
  static Expected<std::unique_ptr<Datapath>> Open(const Options& options);

  virtual bool adopted() const = 0;  // true if pinned state was re-used
  virtual Capabilities capabilities() const = 0;

  // Attaches the XDP program to a port (and its devmap egress program for
  // replication). Idempotent.
  virtual Status AttachPort(const std::string& ifname) = 0;
  virtual Status DetachPort(const std::string& ifname) = 0;
  virtual std::vector<PortState> Ports() const = 0;

  // Programs a tree (create or update, idempotent). Validates ranges, ports
  // and slot capacity; the slot range [slot_base, slot_base + pool_size)
  // must not overlap another tree's.
  virtual Status ConfigureTree(const TreeSpec& spec) = 0;
  virtual Status RemoveTree(uint16_t tree_id) = 0;  // NotFound if absent
  // Trees currently in the maps (read back, e.g. after an agent restart).
  virtual Expected<std::vector<TreeSpec>> ListTrees() const = 0;
  virtual uint32_t FreeSlots() const = 0;

  virtual Expected<Stats> ReadStats() const = 0;

  // Detaches from every port and removes the pinned state (clean shutdown).
  virtual Status Destroy() = 0;

  // The maps that the sibling tables (ForwardingTable in forwarding.h,
  // CreditTable in credit_table.h), selftests and benchmarks reach directly.
  // An enum rather than a name, so that a wrong map fails to compile.
  enum class MapId {
    kSlots,
    kStats,
    kDrops,
    kBpt,
    kPortHealth,
    kPortTx,
    kFwdStats,
    kCreditFlows,
    kCreditCounters,
    kCreditIngress,
    kCreditXskSlots,
    kCreditXsks,
    kCreditStats,
  };
  // The loaded programs and maps (-1 where there are none).
  virtual int ingress_prog_fd() const { return -1; }
  virtual int egress_prog_fd() const { return -1; }
  virtual int map_fd(MapId /*map*/) const { return -1; }
  // The directory holding the pinned state: pin_root/switch_name.
  virtual std::string pin_dir() const { return {}; }
};

}  // namespace inc::dp
