// SPDX-License-Identifier: Apache-2.0
// incswitchd's Prometheus metrics, rendered on each scrape from what the
// agent reports through its gRPC service (stats and capabilities): the
// data path's global counters, drops by reason, per tree and per member
// counters, and each port's link and XDP state (docs/operations.md
// "Metrics").
#pragma once

#include <string>

#include "inc/v1/inc.pb.h"

namespace inc::sw {

std::string RenderSwitchMetrics(const v1::SwitchStats& stats,
                                const v1::GetCapabilitiesResponse& capabilities);

}  // namespace inc::sw
