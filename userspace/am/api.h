// SPDX-License-Identifier: Apache-2.0
// What the aggregation manager's operations take and return, as plain
// domain types: the gRPC service translates its messages to and from these
// at the edge (convert.h), so the manager, membership, switch registry and
// event log never see a proto.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "am/model.h"
#include "common/net.h"

namespace inc::am {

// What a group asks of its tree; 0 fields take the AM's defaults (pool
// size, elements per packet) or whatever every switch supports (masks).
struct TreeAsk {
  uint32_t pool_size = 0;
  uint32_t elems_per_packet = 0;
  uint32_t dtype_mask = 0;
  uint32_t op_mask = 0;
  uint32_t coll_mask = 0;
};

// A member as it describes itself: a topology host name, or an IP that
// names one; addresses it leaves out come from the topology.
struct MemberInfo {
  std::string host;
  std::optional<Ipv4> ip;
  std::optional<Mac> mac;
  uint32_t qpn = 0;
  uint32_t rkey = 0;
  uint64_t va_base = 0;
  uint32_t slot_stride = 0;
  int transport = 0;  // a valid v1::Transport value (checked at the edge)
};

struct JoinRequest {
  std::string job;
  uint32_t world = 0;
  uint32_t rank = 0;
  MemberInfo member;
  TreeAsk ask;
  uint32_t timeout_ms = 0;  // 0: the AM's join timeout
  // Several ranks per host: the job's ranks behind this member (empty: the
  // member is one rank) out of total_ranks (docs/architecture.md "Several
  // ranks per host").
  std::vector<uint32_t> host_ranks;
  uint32_t total_ranks = 0;
  // Who joins: the host named by the caller's verified member certificate
  // ("" where nothing is authorized). Kept with the rank (and in the state
  // store): only that host may speak for the rank afterwards.
  std::string owner;
};

// What a member needs to run collectives on its tree.
struct Assignment {
  uint32_t tree_id = 0;
  uint32_t key = 0;
  uint32_t pool_size = 0;
  uint32_t elems_per_packet = 0;
  uint32_t rank_at_switch = 0;
  uint32_t member_index = 0;
  std::string switch_name;
  Ipv4 switch_ip;
  Mac switch_mac;
  uint32_t switch_qpn = 0;
  uint32_t slot_stride = 0;
  uint32_t heartbeat_interval_ms = 0;
  std::vector<uint32_t> member_index_of_rank;
  uint32_t dtype_mask = 0;
  uint32_t op_mask = 0;
  uint32_t coll_mask = 0;
  uint32_t world = 0;
};

// A tree by id, by job, or both (then both must match).
struct TreeRef {
  uint32_t tree_id = 0;
  std::string job;
};

// `as_host` on the calls a member makes for a rank: the host its verified
// certificate names, which must be the one that joined the rank
// (PERMISSION_DENIED otherwise); nullopt where nothing is authorized.
struct MemberBeat {
  TreeRef tree;
  uint32_t rank = 0;
  std::optional<std::string> as_host;
};

struct MemberBeatReply {
  TreeState state = TreeState::kPending;
  std::string reason;
  uint32_t generation = 0;
  std::string root_switch;
};

struct ErrorReport {
  TreeRef tree;
  uint32_t rank = 0;
  std::string error;
  uint64_t msg_id = 0;
  uint32_t timeouts = 0;
  bool gave_up = false;  // the member's collective timed out: fail the tree
  std::optional<std::string> as_host;
};

struct SwitchRegistration {
  std::string name;
  std::string agent_address;
  Caps caps;
  std::map<std::string, PortState> ports;
  std::vector<uint32_t> live_tree_ids;
  // The verified certificate it registered with (PEM; empty in plaintext):
  // over NETCONF the switch must present its key as SSH host key.
  std::string certificate_pem;
};

struct SwitchBeat {
  std::string name;
  std::map<std::string, PortState> ports;
  std::map<std::string, uint32_t> congested_ports;  // port -> ARN severity
  std::vector<uint32_t> live_tree_ids;
};

// What operators see of a switch.
struct SwitchSummary {
  std::string name;
  bool known = false;  // registered now or before; else only the name is set
  std::string agent_address;
  bool alive = false;
  Caps caps;
  uint32_t free_slots = 0;
  std::vector<PortState> ports;
  uint64_t last_heartbeat_ms_ago = 0;
  std::vector<uint32_t> tree_ids;
};

// The topology file with what the switches report of their ports.
struct TopologyView {
  struct Node {
    std::string name;
    std::string kind;              // "leaf", "spine" or "host"
    std::vector<PortState> ports;  // a switch's, as it reported them
    std::optional<Ipv4> host_ip;   // a host's, from the topology file
    std::optional<Mac> host_mac;
  };
  struct Link {
    std::string a, a_port, b, b_port;
    bool up = false;
  };
  std::vector<Node> nodes;
  std::vector<Link> links;
};

struct CreateTreeRequest {
  std::string job;
  std::vector<std::string> hosts;  // rank i runs on hosts[i]
  uint32_t world = 0;              // 0: hosts.size()
  TreeAsk ask;
};

// What operators see of a tree.
struct TreeInfo {
  struct Member {
    uint32_t rank = 0;
    bool joined = false;
    MemberSpec spec;                   // only the host unless joined
    std::vector<uint32_t> host_ranks;  // the job's ranks behind this member, if several per host
    // With a plan:
    std::optional<uint32_t> member_index;
    std::string switch_name;
    uint32_t rank_at_switch = 0;
    std::string switch_port;
    std::optional<uint64_t> last_heartbeat_ms_ago;  // while active
  };
  struct Switch {
    std::string name;
    TreeRole role = TreeRole::kSingle;
    std::string parent;
    std::optional<uint32_t> slot_base;
    uint32_t num_children = 0;
  };
  uint32_t tree_id = 0;
  std::string job;
  TreeState state = TreeState::kPending;
  uint32_t world = 0;
  std::string reason;
  uint64_t created_unix_ms = 0, activated_unix_ms = 0, dismantled_unix_ms = 0;
  uint64_t build_us = 0, program_us = 0;
  uint32_t error_reports = 0;
  uint32_t joined = 0;
  uint32_t generation = 0;
  uint32_t moves = 0;
  uint64_t last_move_unix_ms = 0;
  std::string last_move_reason;
  uint32_t pool_size = 0;
  uint32_t elems_per_packet = 0;
  bool planned = false;  // the masks, root and switches below are known
  uint32_t dtype_mask = 0, op_mask = 0, coll_mask = 0;
  std::string root_switch;
  std::vector<Switch> switches;
  std::vector<Member> members;
};

// A switch agent the AM reaches, for relaying operator calls.
struct SwitchTarget {
  std::string name;
  std::string agent_address;
};

}  // namespace inc::am
