// SPDX-License-Identifier: Apache-2.0
// How a daemon serves /metrics from its config: "metrics_listen" and
// "metrics_tls" ("off", "tls": HTTPS with the daemon's own certificate,
// "mtls": also require scrapers to present a certificate of the daemon's CA).
// docs/operations.md "Metrics".
#pragma once

#include <string>

#include "common/metrics.h"
#include "common/status.h"
#include "common/tls.h"

namespace inc {

// The config's metrics_tls value is one of "", "off", "tls", "mtls", and TLS
// is asked for only by a daemon that has a certificate (not "insecure").
Status ValidateMetricsTls(const std::string& mode, bool insecure);

// The server options for `listen` and `mode`, with the certificate, key and
// CA read from the daemon's transport security (LoadTlsMaterial's errors).
Expected<MetricsServerOptions> MetricsServing(const std::string& listen, const std::string& mode,
                                              const TransportSecurity& security);

// "HTTP", "HTTPS" or "HTTPS with client certificates", for start-up lines.
std::string DescribeMetricsTls(const std::string& mode);

}  // namespace inc
