// SPDX-License-Identifier: Apache-2.0
// Domain types of the aggregation manager. The tree builder and the resource
// allocator work on these plain structs; proto messages are translated at the
// gRPC edge (convert.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/net.h"
#include "common/status.h"

namespace inc::am {

enum class SwitchKind { kLeaf, kSpine };
enum class TreeRole { kSingle = 1, kLeaf = 2, kRoot = 3 };
// A tree's life; the values are v1::TreeState's (the state store keeps them).
enum class TreeState { kPending = 1, kActive = 2, kFailed = 3, kDestroyed = 4 };

const char* SwitchKindName(SwitchKind kind);
// "SINGLE", "LEAF", "ROOT": v1::Role's names, for logs.
const char* RoleName(TreeRole role);
// "TREE_ACTIVE", ...: the names operators see in the API.
const char* TreeStateName(TreeState state);
inline bool Dismantled(TreeState s) {
  return s == TreeState::kFailed || s == TreeState::kDestroyed;
}

// Allowed-value sets as bit masks: bit v set = enum value v (inc_wire.h values).
struct Caps {
  uint32_t dtype_mask = 0;
  uint32_t op_mask = 0;
  uint32_t coll_mask = 0;
  uint32_t max_children = 64;
  uint32_t slot_capacity = 0;
  uint32_t max_trees = 1023;
  uint32_t max_elems_per_packet = 240;
  bool icrc_verify = false;
};

struct PortState {
  std::string name;
  uint32_t ifindex = 0;
  Mac mac;
  Ipv4 ip;
  uint32_t mtu = 0;  // 0 = unknown
  bool up = true;
  bool xdp_attached = false;  // as the agent reports it, for operators
  std::string xdp_mode;       // "native" or "generic"
};

struct TopoSwitch {
  std::string name;
  SwitchKind kind = SwitchKind::kLeaf;
};

struct TopoHost {
  std::string name;
  Ipv4 ip;
  bool has_ip = false;
  Mac mac;
  bool has_mac = false;
  std::string switch_name;  // attachment switch
  std::string switch_port;  // its port toward the host
};

struct TopoLink {
  std::string a, a_port, b, b_port;
};

// The validated topology file.
struct Topology {
  std::map<std::string, TopoSwitch> switches;
  std::map<std::string, TopoHost> hosts;
  std::vector<TopoLink> links;
  // (x, y) -> links as (x's port, y's port), sorted; both orders are present.
  std::map<std::pair<std::string, std::string>, std::vector<std::pair<std::string, std::string>>> adjacency;

  const TopoHost* HostByIp(const Ipv4& ip) const;
  // Links between switches x and y as (x's port, y's port), sorted by x's port.
  std::vector<std::pair<std::string, std::string>> LinksBetween(const std::string& x,
                                                                const std::string& y) const;
  // Does any link or host attachment use this switch port?
  bool PortUsed(const std::string& sw, const std::string& port) const;
};

// What the builder knows about a switch: registration facts plus the AM's own
// resource accounting.
struct SwitchView {
  std::string name;
  bool registered = false;
  bool alive = false;
  Caps caps;
  std::map<std::string, PortState> ports;
  uint32_t free_slots = 0;          // total free
  uint32_t largest_free_block = 0;  // a tree's pool must be contiguous
  uint32_t trees = 0;               // trees allocated on it
};

// What a tree must support and how big it is.
struct Requirements {
  uint32_t dtype_mask = 0;  // 0 = whatever every switch supports
  uint32_t op_mask = 0;
  uint32_t coll_mask = 0;
  uint32_t pool_size = 256;
  uint32_t elems_per_packet = 0;  // 0 = default_elems, capped by switches and MTUs
  uint32_t default_elems = 0;     // 0 = the largest the tree allows
};

struct MemberPlacement {
  uint32_t rank = 0;
  std::string host;  // topology host name
};

struct PlanChild {
  bool is_switch = false;
  uint32_t rank = 0;      // member child: its job rank
  std::string peer;       // host or switch name
  std::string port;       // this switch's port toward the child
  std::string peer_port;  // switch child: its port toward this switch
  uint32_t member_lo = 0;
  uint32_t member_hi = 0;
};

struct PlanSwitch {
  std::string name;
  TreeRole role = TreeRole::kSingle;
  std::string parent;            // LEAF only
  std::string parent_port;       // this switch's port toward the parent
  std::string parent_peer_port;  // the parent's port toward this switch
  uint32_t rank_at_parent = 0;
  std::vector<PlanChild> children;  // index = rank at this switch
};

struct MemberSlot {
  size_t switch_index = 0;  // into TreePlan::switches
  uint32_t rank_at_switch = 0;
};

struct TreePlan {
  std::vector<PlanSwitch> switches;  // root first
  std::vector<uint32_t> member_index_of_rank;
  std::vector<MemberSlot> member_slot;  // by rank
  uint32_t pool_size = 0;
  uint32_t elems_per_packet = 0;
  uint32_t dtype_mask = 0;
  uint32_t op_mask = 0;
  uint32_t coll_mask = 0;

  const PlanSwitch* Find(const std::string& name) const;
};

// What a member told the AM when it joined (and what the switches need to
// reach it).
struct MemberSpec {
  std::string host;  // topology host name
  Ipv4 ip;
  Mac mac;
  uint32_t qpn = 0;
  uint32_t rkey = 0;
  uint64_t va_base = 0;
  uint32_t slot_stride = 0;
  int transport = 0;
};

// Per-switch resources of one tree.
struct SwitchAlloc {
  uint32_t slot_base = 0;
  std::vector<uint32_t> child_qpns;  // index = rank at this switch
  uint32_t parent_qpn = 0;           // LEAF: DestQP the parent's frames carry toward us
};

struct TreeAlloc {
  std::map<std::string, SwitchAlloc> per_switch;
};

// One peer of a switch in a tree: a member or another switch.
struct EndpointConfig {
  std::string port;  // this switch's port toward the peer
  Mac peer_mac;
  Ipv4 peer_ip;
  uint32_t peer_qpn = 0;    // DestQP of frames toward the peer
  uint32_t switch_qpn = 0;  // DestQP the peer's frames carry toward the switch
  uint32_t rkey = 0;
  uint64_t va_base = 0;
  uint32_t slot_stride = 0;
  uint32_t member_lo = 0;  // members [lo, hi) reachable through this peer
  uint32_t member_hi = 0;
  std::string peer_name;
};

// What one switch holds for one tree (sent to its agent).
struct TreeConfig {
  uint32_t tree_id = 0;
  uint32_t key = 0;
  TreeRole role = TreeRole::kSingle;
  uint32_t pool_size = 0;
  uint32_t elems_per_packet = 0;
  uint32_t slot_base = 0;
  uint32_t dtype_mask = 0, op_mask = 0, coll_mask = 0;
  std::vector<EndpointConfig> children;  // index = rank at this switch
  std::optional<EndpointConfig> parent;  // LEAF
  uint32_t rank_at_parent = 0;
  std::string job;
  uint32_t generation = 0;
};

// Largest elements per packet (4-byte) that a port MTU allows: the IB path MTU
// is the biggest of 256..4096 that fits the Ethernet MTU minus the RoCEv2
// headers, and the INC header takes 24 bytes of it.
uint32_t MaxElemsForMtu(uint32_t eth_mtu);

}  // namespace inc::am
