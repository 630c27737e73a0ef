// SPDX-License-Identifier: Apache-2.0
// C++ view of bpf/include/inc_credit.h: pins the map layouts of the credit
// gate (credit_counters is mmapped by the agent).
#pragma once

#include <cstddef>

#include "inc_credit.h"

static_assert(sizeof(inc_credit_flow_key) == 16, "inc_credit_flow_key layout");
static_assert(offsetof(inc_credit_flow_key, sport) == 8);
static_assert(offsetof(inc_credit_flow_key, dest_qpn) == 12);
static_assert(sizeof(inc_credit_flow) == 24, "inc_credit_flow layout");
static_assert(offsetof(inc_credit_flow, dmac) == 8);
static_assert(offsetof(inc_credit_flow, smac) == 14);
static_assert(offsetof(inc_credit_flow, flags) == 20);
static_assert(sizeof(inc_credit_counters) == 32, "inc_credit_counters layout (mmaped)");
static_assert(offsetof(inc_credit_counters, consumed) == 8);
static_assert(offsetof(inc_credit_counters, queued) == 16);
static_assert(sizeof(inc_credit_xsk_key) == 8, "inc_credit_xsk_key layout");
static_assert(sizeof(inc_credit_ingress_key) == 8, "inc_credit_ingress_key layout");
static_assert(offsetof(inc_credit_ingress_key, ifindex) == 4);
