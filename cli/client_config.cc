// SPDX-License-Identifier: Apache-2.0
#include "cli/client_config.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <fstream>
#include <sstream>

namespace inc::cli {

Expected<ClientConfig> ParseClientConfigJson(const std::string& text, const std::string& path) {
  google::protobuf::Struct doc;
  auto parsed = google::protobuf::util::JsonStringToMessage(text, &doc);
  if (!parsed.ok()) return InvalidArgument(path + ": not a JSON object: " + std::string(parsed.message()));
  ClientConfig c;
  for (const auto& [key, value] : doc.fields()) {
    if (key == "insecure") {
      if (value.kind_case() != google::protobuf::Value::kBoolValue)
        return InvalidArgument(path + ": \"insecure\" must be true or false");
      c.insecure = value.bool_value();
      continue;
    }
    std::optional<std::string>* field = key == "am"     ? &c.am
                                        : key == "cert" ? &c.cert
                                        : key == "key"  ? &c.key
                                        : key == "ca"   ? &c.ca
                                                        : nullptr;
    if (!field)
      return InvalidArgument(path + ": unknown key \"" + key + "\" (known: am, cert, key, ca, insecure)");
    if (value.kind_case() != google::protobuf::Value::kStringValue || value.string_value().empty())
      return InvalidArgument(path + ": \"" + key + "\" must be a non-empty string");
    *field = value.string_value();
  }
  return c;
}

Expected<ClientConfig> LoadClientConfigFile(const std::string& path, bool must_exist) {
  if (path.empty()) return ClientConfig{};
  std::ifstream f(path);
  if (!f) {
    if (!must_exist) return ClientConfig{};
    return InvalidArgument(path + " (INCIN_CONFIG): cannot be read");
  }
  std::stringstream text;
  text << f.rdbuf();
  return ParseClientConfigJson(text.str(), path);
}

UserConfigPath FindUserConfig(const settings::EnvLookup& env) {
  auto get = [&](const char* name) {
    const char* v = env(name);
    return std::string(v ? v : "");
  };
  if (std::string p = get("INCIN_CONFIG"); !p.empty()) return {p, true};
  if (std::string x = get("XDG_CONFIG_HOME"); !x.empty()) return {x + "/incin/incinctl.json", false};
  if (std::string h = get("HOME"); !h.empty()) return {h + "/.config/incin/incinctl.json", false};
  return {};
}

Expected<ClientConfig> ClientConfigFromEnv(const settings::Reader& reader) {
  ClientConfig c;
  auto text = [&](const char* name) -> std::optional<std::string> {
    auto v = reader.Raw(name);
    return v ? std::optional<std::string>(v->text) : std::nullopt;
  };
  c.am = text("INCIN_AM");
  c.cert = text("INCIN_TLS_CERT");
  c.key = text("INCIN_TLS_KEY");
  c.ca = text("INCIN_TLS_CA");
  if (reader.IsSet("INCIN_INSECURE")) {
    auto v = reader.Choice("INCIN_INSECURE");
    if (!v.ok()) return v.status();
    c.insecure = *v == "1";
  }
  return c;
}

ClientConfig Resolve(const std::vector<ClientConfig>& by_precedence) {
  ClientConfig out;
  for (auto it = by_precedence.rbegin(); it != by_precedence.rend(); ++it) {
    if (it->am) out.am = it->am;
    if (it->cert) out.cert = it->cert;
    if (it->key) out.key = it->key;
    if (it->ca) out.ca = it->ca;
    if (it->insecure) out.insecure = it->insecure;
  }
  return out;
}

}  // namespace inc::cli
