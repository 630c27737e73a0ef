// SPDX-License-Identifier: Apache-2.0
#include "params.h"

#include <cctype>

#include "common/settings.h"
#include "mpi/config.h"

namespace inc::ompi {

namespace {

// The parameter's name: INCIN_MPI_MIN_BYTES -> min_bytes, INCIN_AM -> am.
std::string NameOf(const std::string& setting) {
  std::string n = setting.substr(setting.rfind("INCIN_", 0) == 0 ? 6 : 0);
  if (n.rfind("MPI_", 0) == 0) n = n.substr(4);
  for (char& c : n) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return n;
}

std::string AcceptedOf(const settings::Setting& s) {
  switch (s.type) {
    case settings::Type::kBool: return "0|1|true|false|yes|no|on|off";
    case settings::Type::kUInt: return "a number up to " + std::to_string(s.max);
    case settings::Type::kBytes: return "bytes, with an optional K, M or G suffix";
    case settings::Type::kChoice: return s.accepted;
    case settings::Type::kString: break;
  }
  return "";
}

McaParam Make(const char* setting, int level) {
  const settings::Setting* s = settings::Find(setting);
  McaParam p{setting, level, NameOf(setting), "", s && s->default_value ? s->default_value : ""};
  // Where the table has no default, the one libincmpi's Config has.
  const mpi::Config defaults;
  if (p.name == "join_timeout_ms") p.def = std::to_string(defaults.join_timeout_ms);
  if (p.name == "op_timeout_ms") p.def = std::to_string(defaults.op_timeout_ms);
  std::string help = s ? s->doc : "";
  const std::string accepted = s ? AcceptedOf(*s) : "";
  if (!accepted.empty()) help += "; accepted: " + accepted;
  help += ". When set, wins over the variable " + std::string(setting) + ", which applies otherwise";
  p.help = help;
  return p;
}

}  // namespace

const std::vector<McaParam>& McaParams() {
  // Levels as Open MPI's: 1-3 for users (where the AM is and how to reach
  // it), 4-6 for tuning, none above.
  static const std::vector<McaParam> params = {
      Make("INCIN_AM", 3),
      Make("INCIN_IFACE", 3),
      Make("INCIN_TLS_CERT", 3),
      Make("INCIN_TLS_KEY", 3),
      Make("INCIN_TLS_CA", 3),
      Make("INCIN_INSECURE", 3),
      Make("INCIN_TRANSPORT", 4),
      Make("INCIN_JOB_ID", 4),
      Make("INCIN_REQUIRE_OFFLOAD", 4),
      Make("INCIN_MPI_LOG_LEVEL", 4),
      Make("INCIN_MPI_SUMMARY", 4),
      Make("INCIN_MPI_SUMMARY_JSON", 4),
      Make("INCIN_MPI_MIN_BYTES", 5),
      Make("INCIN_MPI_MAX_BYTES", 5),
      Make("INCIN_MPI_FLOAT_SUM", 5),
      Make("INCIN_JOIN_TIMEOUT_MS", 5),
      Make("INCIN_OP_TIMEOUT_MS", 5),
      Make("INCIN_MPI_FALLBACK_LOG_LEVEL", 5),
      Make("INCIN_MPI_FALLBACK_LOG", 5),
      Make("INCIN_MPI_REDUCE_MODE", 6),
      Make("INCIN_MPI_BROADCAST_MODE", 6),
  };
  return params;
}

const std::vector<Unregistered>& UnregisteredSettings() {
  static const std::vector<Unregistered> list = {
      {"INCIN_MPI_ENABLE",
       "coll_incin_enable decides whether the component is used at all; INCIN_MPI_ENABLE=0 keeps a used one "
       "selected and sends every call on (reason=disabled)"},
      {"INCIN_JOB_CREDENTIAL",
       "a secret: Open MPI 4.1 has no flag that keeps ompi_info from printing a parameter's value, and "
       "mpirun "
       "hands --mca values to its daemons on their command lines, which every local user can read"},
      {"INCIN_LOCAL_SIZE", "coll/incin finds the ranks per host itself (MPI_COMM_TYPE_SHARED)"},
      {"INCIN_LOCAL_RANK", "coll/incin finds the ranks per host itself (MPI_COMM_TYPE_SHARED)"},
      {"INCIN_XSK_SPIN_US", "libinc's AF_XDP transport reads it from the environment, below coll/incin"},
      {"INCIN_FLOAT32_LANES", "libinc's communicator reads it from the environment, below coll/incin"},
  };
  return list;
}

}  // namespace inc::ompi

extern "C" {

int incin_param_count(void) {
  return static_cast<int>(inc::ompi::McaParams().size());
}

const char* incin_param_name(int i) {
  return inc::ompi::McaParams()[static_cast<size_t>(i)].name.c_str();
}

const char* incin_param_help(int i) {
  return inc::ompi::McaParams()[static_cast<size_t>(i)].help.c_str();
}

const char* incin_param_default(int i) {
  return inc::ompi::McaParams()[static_cast<size_t>(i)].def.c_str();
}

int incin_param_level(int i) {
  return inc::ompi::McaParams()[static_cast<size_t>(i)].level;
}

}  // extern "C"
