// SPDX-License-Identifier: Apache-2.0
// incamd's configuration: the AmConfig file, command-line flags over it, and
// the checks of single fields and of fields against each other, each error
// naming the field (or flag) at fault.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/tls.h"
#include "inc/v1/inc.pb.h"

namespace inc::am {

// Command-line values; unset ones leave the file's value alone.
struct AmFlags {
  std::optional<std::string> listen;
  std::optional<std::string> topology_file;
  std::optional<std::string> log_level;
  std::optional<std::string> log_format;
  std::optional<bool> insecure;  // --insecure
  std::optional<std::string> state_path;
};

struct AmOptions;
// Applies the non-zero fields of an AmConfig.
void ApplyConfig(const v1::AmConfig& config, AmOptions* options);

// Where the AM keeps its state when the config does not say.
inline constexpr const char* kDefaultStatePath = "/var/lib/incin/incamd.db";

// The state file the config asks for: state_path, the default when absent,
// "" for in-memory state.
std::string StatePath(const v1::AmConfig& config);

// Reads the AmConfig JSON at path (none if empty), makes a relative
// topology_file relative to the config file's folder, then applies flags.
Expected<v1::AmConfig> LoadAmConfig(const std::string& path, const AmFlags& flags);

// What the AM can run with: a listen address with a port in 0..65535, the
// log settings, default_pool_size up to 65535 (a switch's largest pool),
// heartbeat intervals of at least 10 ms with timeouts of at least two
// intervals (one late heartbeat must not fail a tree or declare a switch
// dead), move_on_congestion_severity 0..3, a topology file and a state_path
// that is not a folder, in a folder that exists (the default's folder is
// created at start). Absent
// fields are checked at their defaults, and the message says so.
Status ValidateAmConfig(const v1::AmConfig& config);

// How incamd serves and dials: mTLS with config "tls" {cert, key, ca}, or
// plaintext with "insecure": true (or --insecure). Neither, both, or an
// incomplete tls object is an error that says what to set.
Expected<TransportSecurity> AmTransportSecurity(const v1::AmConfig& config);

// incamd --check-config: the config as incamd would run with it, every
// absent field at its default (state_path included), for printing as JSON.
v1::AmConfig EffectiveAmConfig(const v1::AmConfig& config);

struct Topology;
// incamd --check-config: what can be checked of a whole site without
// starting: the config's own checks (ValidateAmConfig), its transport
// security settings, NETCONF settings, metrics_listen apart from listen, the
// topology file, and each switch agent config in `switch_configs` (paths)
// against config and topology: the switch is in the topology, every port the
// topology gives it (hosts, links) is one of its ports, it dials the AM
// with the same transport security (TLS or insecure). An error names the
// file and the field. `notes` gets what may be intended but is worth a
// look (a switch port no host or link uses, am_address not listen) and facts
// of this host start would need (certificate files that cannot be read).
// On success *topology is the validated topology.
Status CheckAmSite(const v1::AmConfig& config, const std::vector<std::string>& switch_configs,
                   Topology* topology, std::vector<std::string>* notes);

// What incamd runs with, for SIGHUP to compare a re-read config against.
struct RunningAm {
  v1::AmConfig config;
  v1::TopologyFile topology;  // as read at start
};

// The AmConfig fields SIGHUP applies to a running AM (Manager::Retune's):
// the timeouts it enforces, the defaults of trees built from now on and the
// congestion-move policy.
const std::set<std::string>& AmLiveFields();

// SIGHUP: reads the config file again (flags keep their precedence) and the
// topology file it names, applies what can change while running (log_level,
// log_format, AmLiveFields() through `retune`) and logs one line per change:
// applied, or not applied because it needs a restart (everything else, the
// topology file's contents included). A file that cannot be read or is
// invalid, alone or with the running values of the fields that need a
// restart, changes nothing and is logged as an error. Updates
// running->config to what is now in force.
void ReloadAmConfig(const std::string& path, const AmFlags& flags, RunningAm* running,
                    const std::function<void(const v1::AmConfig&)>& retune);

}  // namespace inc::am
