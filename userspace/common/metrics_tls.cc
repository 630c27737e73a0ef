// SPDX-License-Identifier: Apache-2.0
#include "common/metrics_tls.h"

namespace inc {

Status ValidateMetricsTls(const std::string& mode, bool insecure) {
  if (mode.empty() || mode == "off") return Status::Ok();
  if (mode != "tls" && mode != "mtls")
    return InvalidArgument("metrics_tls '" + mode + "' is not 'off', 'tls' or 'mtls'");
  if (insecure)
    return InvalidArgument("metrics_tls '" + mode +
                           "' needs the daemon's certificate (config \"tls\"), but it runs \"insecure\"");
  return Status::Ok();
}

Expected<MetricsServerOptions> MetricsServing(const std::string& listen, const std::string& mode,
                                              const TransportSecurity& security) {
  INC_RETURN_IF_ERROR(ValidateMetricsTls(mode, security.insecure));
  MetricsServerOptions options;
  options.listen = listen;
  if (mode == "tls" || mode == "mtls") {
    auto material = LoadTlsMaterial(security.files);
    if (!material.ok()) return material.status().WithContext("metrics_tls");
    options.cert_pem = material->cert_pem;
    options.key_pem = material->key_pem;
    if (mode == "mtls") options.client_ca_pem = material->ca_pem;
  }
  return options;
}

std::string DescribeMetricsTls(const std::string& mode) {
  if (mode == "tls") return "HTTPS";
  if (mode == "mtls") return "HTTPS with client certificates";
  return "HTTP";
}

}  // namespace inc
