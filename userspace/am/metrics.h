// SPDX-License-Identifier: Apache-2.0
// incamd's Prometheus metrics, rendered on each scrape from the manager's
// operator view (switches and trees, as incinctl sees them) plus its
// timing histograms (docs/operations.md "Metrics").
#pragma once

#include <string>

#include "am/manager.h"

namespace inc::am {

std::string RenderAmMetrics(Manager* manager);

}  // namespace inc::am
