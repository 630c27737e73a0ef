// SPDX-License-Identifier: Apache-2.0
// The edge between the control plane's messages (inc.v1) and the data path's
// domain types (inc::dp): TreeConfig -> TreeSpec with every check the agent
// owes the AM, and the reverse direction for capabilities, ports and stats.
// Pure logic: the port table and the data path's limits come in as values.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "datapath/datapath.h"
#include "inc/v1/inc.pb.h"

namespace inc::sw {

// What translation needs to know about a local port.
struct PortFacts {
  bool attached = false;  // XDP program attached
  bool up = false;
};

// Local port name -> facts; an absent name is not a port of this switch.
using PortTable = std::map<std::string, PortFacts>;

// Checks a TreeConfig and builds the TreeSpec the data path programs.
//   INVALID_ARGUMENT   tree id, role, pool size, elements per packet, enum
//                      values, addresses, QPNs, ranks, parent presence
//   NOT_FOUND          an endpoint's port is not a port of this switch
//   FAILED_PRECONDITION an endpoint's port has no XDP program or is down
//   RESOURCE_EXHAUSTED more children than the data path supports
Expected<dp::TreeSpec> TreeConfigToSpec(const v1::TreeConfig& config, const PortTable& ports,
                                        const dp::Capabilities& caps);

// Checks that a spec fits next to the trees already live (other ids):
// RESOURCE_EXHAUSTED if [slot_base, slot_base + pool) leaves the slot
// capacity or the tree table is full, ALREADY_EXISTS if the range overlaps
// another tree's.
Status CheckPlacement(const dp::TreeSpec& spec, const std::map<uint16_t, dp::TreeSpec>& live,
                      const dp::Capabilities& caps);

void FillCapabilities(const dp::Capabilities& caps, uint32_t free_slots, v1::Capabilities* out);

// Stats for one tree (tree_id != 0) or all; member counters carry the switch
// QPN of the child at that rank when the tree is known.
void FillStats(const dp::Stats& stats, uint16_t tree_id, const std::map<uint16_t, dp::TreeSpec>& live,
               v1::SwitchStats* out);

}  // namespace inc::sw
