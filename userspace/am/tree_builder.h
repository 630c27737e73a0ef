// SPDX-License-Identifier: Apache-2.0
// Tree building (docs/architecture.md): members under one switch -> a
// single-level tree on it; members under several leaves -> a spine that links
// to all of them is the root. Switches that are not alive, lack a required
// capability or lack capacity are left out; the choice among spines is
// deterministic (most free slots, then name).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "am/model.h"
#include "common/status.h"

namespace inc::am {

// members[i].rank must be i (world size = members.size()). Errors:
// NOT_FOUND (unknown host), FAILED_PRECONDITION (unreachable member, no
// capable or linked spine, two members on one switch port), RESOURCE_EXHAUSTED
// (slots, children or tree capacity), INVALID_ARGUMENT (elements per packet or
// pool size out of range).
Expected<TreePlan> BuildTreePlan(const Topology& topo, const std::map<std::string, SwitchView>& views,
                                 const std::vector<MemberPlacement>& members, const Requirements& req);

// "FP32, INT64" for a dtype mask (and the same for ops and collectives).
std::string DtypeMaskNames(uint32_t mask);
std::string OpMaskNames(uint32_t mask);
std::string CollMaskNames(uint32_t mask);

}  // namespace inc::am
