// SPDX-License-Identifier: Apache-2.0
// Where incinctl finds the AM's address and its TLS files, so that a shell
// needs no variables: command-line flags, then the environment (INCIN_AM,
// INCIN_TLS_CERT/KEY/CA, INCIN_INSECURE; common/settings.h), then the
// user's file ($INCIN_CONFIG, else $XDG_CONFIG_HOME/incin/incinctl.json,
// else ~/.config/incin/incinctl.json), then the system's
// (/etc/incin/incinctl.json). A file is a JSON object with any of
//   {"am": "10.0.0.1:50051", "cert": "/etc/incin/op.pem",
//    "key": "/etc/incin/op.key", "ca": "/etc/incin/ca.pem", "insecure": false}
// (the flags' names); a missing file is no error unless $INCIN_CONFIG
// names it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/settings.h"
#include "common/status.h"

namespace inc::cli {

constexpr const char* kSystemConfigPath = "/etc/incin/incinctl.json";

// One source's settings; unset fields leave the choice to the next source.
struct ClientConfig {
  std::optional<std::string> am, cert, key, ca;
  std::optional<bool> insecure;
};

// A config file's text; `path` appears in errors (unknown keys, wrong
// types, bad JSON).
Expected<ClientConfig> ParseClientConfigJson(const std::string& text, const std::string& path);

// The file at `path`: an empty ClientConfig when it does not exist and
// `must_exist` is false.
Expected<ClientConfig> LoadClientConfigFile(const std::string& path, bool must_exist);

// The user's file: $INCIN_CONFIG (must exist), else
// $XDG_CONFIG_HOME/incin/incinctl.json, else $HOME/.config/incin/incinctl.json.
struct UserConfigPath {
  std::string path;  // "" when neither $INCIN_CONFIG nor $XDG_CONFIG_HOME nor $HOME is set
  bool must_exist = false;
};
UserConfigPath FindUserConfig(const settings::EnvLookup& env);

// INCIN_AM, INCIN_TLS_* and INCIN_INSECURE (or their old names) as a source.
Expected<ClientConfig> ClientConfigFromEnv(const settings::Reader& reader);

// Field by field, the first source that sets it (highest precedence first).
ClientConfig Resolve(const std::vector<ClientConfig>& by_precedence);

}  // namespace inc::cli
