// SPDX-License-Identifier: Apache-2.0
// C++ view of bpf/include/inc_forward.h: pins the best-path and port map
// layouts and the ARN message.
#pragma once

#include <cstddef>

#include "inc_forward.h"

static_assert(sizeof(inc_bpt_key) == 8, "inc_bpt_key layout (LPM trie: prefixlen first)");
static_assert(offsetof(inc_bpt_key, addr) == 4);
static_assert(sizeof(inc_bpt_hop) == 20, "inc_bpt_hop layout");
static_assert(offsetof(inc_bpt_hop, cost) == 4);
static_assert(offsetof(inc_bpt_hop, flags) == 6);
static_assert(offsetof(inc_bpt_hop, dmac) == 8);
static_assert(offsetof(inc_bpt_hop, smac) == 14);
static_assert(sizeof(inc_bpt_entry) == 8 + INC_BPT_MAX_HOPS * sizeof(inc_bpt_hop), "inc_bpt_entry layout");
static_assert(sizeof(inc_port_health) == 8, "inc_port_health layout");
static_assert(sizeof(inc_port_tx) == 16, "inc_port_tx layout");
static_assert(offsetof(inc_port_tx, bytes) == 8);
// ARN messages cross the network between switches.
static_assert(sizeof(inc_arn_msg) == 40, "ARN message layout");
static_assert(offsetof(inc_arn_msg, origin) == 8);
static_assert(offsetof(inc_arn_msg, seq) == 20);
static_assert(offsetof(inc_arn_msg, timestamp_ns) == 24);
static_assert(offsetof(inc_arn_msg, auth) == 36);
