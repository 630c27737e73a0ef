// SPDX-License-Identifier: Apache-2.0
// incswitchd's edge toward the AM (switch/tree/translate.cc): the TreeConfig of a
// ConfigureTree call, checked and turned into the data path's TreeSpec. The
// input is a serialized TreeConfig (inputs that do not parse are skipped).
// Every port an endpoint names exists and is up, except "down" (down) and
// "bare" (no XDP program), so the checks behind the port lookup run.
// Invariants: an accepted spec has what the data path relies on: one child
// per port, distinct child QPNs, QPNs in 1..2^24-1, member ranges in order,
// a parent exactly for a leaf; and it fits an empty switch it was sized for.
#include <set>
#include <string>

#include "fuzz_check.h"
#include "switch/tree/translate.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  inc::fuzz::QuietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inc::v1::TreeConfig config;
  if (!config.ParseFromArray(data, static_cast<int>(size))) return 0;

  inc::sw::PortTable ports;
  auto add_port = [&](const inc::v1::Endpoint& e) {
    ports[e.port()] = inc::sw::PortFacts{e.port() != "bare", e.port() != "down"};
  };
  for (const auto& child : config.children()) add_port(child);
  if (config.has_parent()) add_port(config.parent());

  inc::dp::Capabilities caps;
  caps.slot_capacity = 1u << 20;
  caps.dtype_mask = 0xFFFF;
  caps.op_mask = 0xFF;
  caps.coll_mask = 0xFF;
  auto spec = inc::sw::TreeConfigToSpec(config, ports, caps);
  if (!spec.ok()) return 0;

  FUZZ_CHECK(spec->tree_id != 0 && spec->tree_id < INC_MAX_TREES);
  FUZZ_CHECK(spec->pool_size != 0);
  FUZZ_CHECK(spec->max_elems <= caps.max_elems_per_packet);
  FUZZ_CHECK(!spec->children.empty() && spec->children.size() <= caps.max_children);
  std::set<std::string> child_ports;
  std::set<uint32_t> child_qpns;
  for (const auto& c : spec->children) {
    FUZZ_CHECK(child_ports.insert(c.port).second);
    FUZZ_CHECK(child_qpns.insert(c.switch_qpn).second);
    FUZZ_CHECK(c.switch_qpn >= 1 && c.switch_qpn <= INC_QPN_MASK);
    FUZZ_CHECK(c.peer_qpn >= 1 && c.peer_qpn <= INC_QPN_MASK);
    FUZZ_CHECK(c.member_lo <= c.member_hi);
    FUZZ_CHECK(c.peer_ip.host != 0);
  }
  FUZZ_CHECK(spec->parent.has_value() == (spec->role == INC_ROLE_LEAF));
  if (spec->parent) FUZZ_CHECK(!child_qpns.count(spec->parent->switch_qpn));

  // Placement on a switch that holds nothing else, then next to itself.
  inc::dp::Capabilities room = caps;
  room.slot_capacity = static_cast<uint32_t>(spec->slot_base) + spec->pool_size;
  if (room.slot_capacity >= spec->slot_base) {
    FUZZ_CHECK(inc::sw::CheckPlacement(*spec, {}, room).ok());
    FUZZ_CHECK(inc::sw::CheckPlacement(*spec, {{spec->tree_id, *spec}}, room).ok());
  }
  return 0;
}
