// SPDX-License-Identifier: Apache-2.0
#include "common/settings.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "common/log.h"

namespace inc::settings {

namespace {

constexpr uint64_t kNoMax = ~0ull;

const std::vector<Setting>& BuildTable() {
  static const std::vector<Setting> table = {
      // Common to every front end.
      {"INCIN_AM",
       {"INCMPI_AM", "INC_AM_ADDRESS"},
       Type::kString,
       "",
       nullptr,
       0,
       "common",
       "incamd's address host:port; unset = no INC (every collective falls back)"},
      {"INCIN_TLS_CERT",
       {"INC_TLS_CERT"},
       Type::kString,
       "",
       nullptr,
       0,
       "common",
       "PEM certificate for mTLS to incamd"},
      {"INCIN_TLS_KEY",
       {"INC_TLS_KEY"},
       Type::kString,
       "",
       nullptr,
       0,
       "common",
       "PEM private key of the certificate"},
      {"INCIN_TLS_CA",
       {"INC_TLS_CA"},
       Type::kString,
       "",
       nullptr,
       0,
       "common",
       "PEM CA that signed incamd's certificate"},
      {"INCIN_INSECURE",
       {"INC_INSECURE"},
       Type::kChoice,
       "0",
       "0|1",
       0,
       "common",
       "1 = plaintext to incamd (instead of the INCIN_TLS_* files)"},
      {"INCIN_IFACE",
       {"INC_IFACE", "INCMPI_IFACE"},
       Type::kString,
       "",
       nullptr,
       0,
       "common",
       "the worker's interface toward its switch (unset: MPI the default route's, NCCL and torch eth0)"},
      {"INCIN_TRANSPORT",
       {"INC_TRANSPORT", "INCMPI_TRANSPORT"},
       Type::kChoice,
       "auto",
       "auto|xdp|afxdp|verbs",
       0,
       "common",
       "libinc's transport"},
      {"INCIN_JOB_ID",
       {"INC_JOB_ID", "INCMPI_JOB_ID"},
       Type::kString,
       "",
       nullptr,
       0,
       "common",
       "job id of the INC group; unset: the job INCIN_JOB_CREDENTIAL names, else one rank 0 makes"},
      {"INCIN_JOB_CREDENTIAL",
       {"INC_JOB_CREDENTIAL"},
       Type::kString,
       "",
       nullptr,
       0,
       "common",
       "the job credential the launcher got from incamd (docs/operations.md \"Security model\")"},
      {"INCIN_JOIN_TIMEOUT_MS",
       {"INC_JOIN_TIMEOUT_MS", "INCMPI_JOIN_TIMEOUT_MS"},
       Type::kUInt,
       "",
       nullptr,
       3600000,
       "common",
       "how long joining the group may take (unset: MPI and torch 30000, NCCL libinc's 120000)"},
      {"INCIN_OP_TIMEOUT_MS",
       {"INC_OP_TIMEOUT_MS", "INCMPI_OP_TIMEOUT_MS"},
       Type::kUInt,
       "",
       nullptr,
       0xffffffffull,
       "common",
       "how long an offloaded collective waits without progress; 0 = no limit (unset: MPI 0, others libinc's "
       "300000)"},
      {"INCIN_REQUIRE_OFFLOAD",
       {},
       Type::kBool,
       "0",
       nullptr,
       0,
       "common",
       "1 = a collective that would fall back fails with the reason instead"},
      {"INCIN_XSK_SPIN_US",
       {"INC_XSK_SPIN_US"},
       Type::kUInt,
       "",
       nullptr,
       1000000,
       "common",
       "afxdp: microseconds to spin before sleeping on the socket"},
      {"INCIN_FLOAT32_LANES",
       {},
       Type::kChoice,
       "auto",
       "auto|32|64",
       0,
       "common",
       "float32 sums' fixed-point lanes: auto (64-bit for data 32-bit lanes cannot certify), 32 or 64"},
      {"INCIN_LOCAL_SIZE",
       {"INC_LOCAL_SIZE"},
       Type::kUInt,
       "1",
       nullptr,
       256,
       "common",
       "ranks of the job on this host (libinc; MPI finds it itself)"},
      {"INCIN_LOCAL_RANK",
       {"INC_LOCAL_RANK"},
       Type::kUInt,
       "",
       nullptr,
       255,
       "common",
       "this rank among those on its host"},
      // libincmpi and coll/incin.
      {"INCIN_MPI_ENABLE",
       {"INCMPI_ENABLE"},
       Type::kBool,
       "1",
       nullptr,
       0,
       "mpi",
       "0 = every call goes to MPI (reason=disabled)"},
      {"INCIN_MPI_MIN_BYTES",
       {"INCMPI_MIN_BYTES"},
       Type::kBytes,
       "0",
       nullptr,
       1ull << 40,
       "mpi",
       "messages smaller than this (bytes one rank contributes) use MPI's algorithm"},
      {"INCIN_MPI_MAX_BYTES",
       {"INCMPI_MAX_BYTES"},
       Type::kBytes,
       "0",
       nullptr,
       1ull << 40,
       "mpi",
       "messages larger than this use MPI's algorithm; 0 = no limit"},
      {"INCIN_MPI_FLOAT_SUM",
       {"INCMPI_FLOAT_SUM"},
       Type::kChoice,
       "offload",
       "offload|fallback",
       0,
       "mpi",
       "float/double SUM run in fixed point on the switch, or on MPI"},
      {"INCIN_MPI_REDUCE_MODE",
       {"INCMPI_REDUCE_MODE"},
       Type::kChoice,
       "",
       "native|allreduce",
       0,
       "mpi",
       "how MPI_Reduce runs on the switch (unset: libinc's)"},
      {"INCIN_MPI_BROADCAST_MODE",
       {"INCMPI_BROADCAST_MODE"},
       Type::kChoice,
       "",
       "allreduce|native",
       0,
       "mpi",
       "how MPI_Bcast runs on the switch (unset: libinc's)"},
      {"INCIN_MPI_LOG_LEVEL",
       {"INCMPI_LOG_LEVEL"},
       Type::kChoice,
       "warn",
       "debug|info|warn|error",
       0,
       "mpi",
       "log level of libincmpi and libinc"},
      {"INCIN_MPI_FALLBACK_LOG_LEVEL",
       {"INCMPI_FALLBACK_LOG_LEVEL"},
       Type::kChoice,
       "warn",
       "debug|info|warn|error",
       0,
       "mpi",
       "level of the 'fallback reason=...' lines"},
      {"INCIN_MPI_FALLBACK_LOG",
       {"INCMPI_FALLBACK_LOG"},
       Type::kChoice,
       "first",
       "first|all",
       0,
       "mpi",
       "first = one line per call and reason, later ones at debug; all = every one"},
      {"INCIN_MPI_SUMMARY",
       {"INCMPI_SUMMARY"},
       Type::kString,
       "0",
       nullptr,
       0,
       "mpi",
       "0|1|all: per-call table at MPI_Finalize on stderr (1 = rank 0)"},
      {"INCIN_MPI_SUMMARY_JSON",
       {"INCMPI_SUMMARY_JSON"},
       Type::kString,
       "",
       nullptr,
       0,
       "mpi",
       "write the summary as JSON; %r = rank (without %r only rank 0)"},
      // The torch backend.
      {"INCIN_TORCH_ENABLE", {}, Type::kChoice, "1", "0|1", 0, "torch", "0 = every collective runs on gloo"},
      {"INCIN_TORCH_FALLBACK_LOG",
       {},
       Type::kChoice,
       "first",
       "first|all",
       0,
       "torch",
       "first = one line per collective and reason; all = every one"},
      {"INCIN_TORCH_SUMMARY",
       {},
       Type::kChoice,
       "1",
       "0|1|all",
       0,
       "torch",
       "per-collective table when the group is destroyed (1 = rank 0)"},
      {"INCIN_TORCH_SUMMARY_JSON",
       {},
       Type::kString,
       "",
       nullptr,
       0,
       "torch",
       "write the summary as JSON; %r = rank"},
      // incinctl.
      {"INCIN_CONFIG",
       {},
       Type::kString,
       "",
       nullptr,
       0,
       "cli",
       "incinctl's config file instead of ~/.config/incin/incinctl.json and /etc/incin/incinctl.json"},
  };
  return table;
}

Status Bad(const Reader::Value& v, const char* name, const std::string& accepted) {
  std::string who = v.from;
  if (v.from != name) who += " (the old name of " + std::string(name) + ")";
  return InvalidArgument(who + "='" + v.text + "': expected " + accepted);
}

}  // namespace

const std::vector<Setting>& Table() {
  return BuildTable();
}

const Setting* Find(std::string_view name) {
  for (const Setting& s : Table())
    if (name == s.name) return &s;
  return nullptr;
}

const Setting* FindByOldName(std::string_view name) {
  for (const Setting& s : Table())
    for (const char* old : s.old_names)
      if (name == old) return &s;
  return nullptr;
}

bool IsKnownName(std::string_view name) {
  return Find(name) || FindByOldName(name);
}

std::vector<std::string> UnknownNames(char** environ_list) {
  std::vector<std::string> out;
  for (char** e = environ_list; e && *e; e++) {
    if (std::strncmp(*e, "INCIN_", 6) != 0 && std::strncmp(*e, "INCMPI_", 7) != 0) continue;
    std::string name(*e, std::strcspn(*e, "="));
    if (!IsKnownName(name)) out.push_back(name);
  }
  return out;
}

struct Reader::Warned {
  std::mutex mu;
  std::set<std::string> names;
};

Reader::Reader()
    : env_([](const char* n) { return static_cast<const char*>(std::getenv(n)); }),
      warn_([](const std::string& text) { LogLine(LogLevel::kWarn, text); }) {
  static const std::shared_ptr<Warned> process_wide = std::make_shared<Warned>();
  warned_ = process_wide;
}

Reader::Reader(EnvLookup env, WarnSink warn)
    : env_(std::move(env)), warn_(std::move(warn)), warned_(std::make_shared<Warned>()) {}

std::optional<Reader::Value> Reader::Raw(const char* name) const {
  auto get = [&](const char* n) -> std::optional<std::string> {
    const char* v = env_(n);
    if (!v || !*v) return std::nullopt;
    return std::string(v);
  };
  const Setting* s = Find(name);
  std::optional<Value> out;
  if (auto v = get(name)) out = Value{*v, name};
  if (!s) return out;
  for (const char* old : s->old_names) {
    auto v = get(old);
    if (!v) continue;
    std::string text;
    if (out) {
      text = std::string(old) + " and " + out->from + " are both set: " + out->from + " wins; " + old +
             " is deprecated, use " + name;
    } else {
      out = Value{*v, old};
      text =
          std::string(old) + " is deprecated, use " + name + " (the old name works until the next release)";
    }
    if (warn_) {
      bool first;
      {
        std::lock_guard<std::mutex> l(warned_->mu);
        first = warned_->names.insert(old).second;
      }
      if (first) warn_(text);
    }
  }
  return out;
}

namespace {

// The value to parse: the variable's, else the table's default (from =
// "default"), else nullopt.
std::optional<Reader::Value> ValueOrDefault(const Reader& r, const char* name) {
  if (auto v = r.Raw(name)) return v;
  const Setting* s = Find(name);
  if (s && *s->default_value) return Reader::Value{s->default_value, name};
  return std::nullopt;
}

uint64_t MaxOf(const char* name) {
  const Setting* s = Find(name);
  return s && s->max ? s->max : kNoMax;
}

}  // namespace

Expected<std::string> Reader::String(const char* name) const {
  auto v = ValueOrDefault(*this, name);
  return v ? v->text : std::string();
}

Expected<bool> Reader::Bool(const char* name) const {
  auto v = ValueOrDefault(*this, name);
  if (!v) return false;
  const std::string& t = v->text;
  if (t == "1" || t == "true" || t == "yes" || t == "on") return true;
  if (t == "0" || t == "false" || t == "no" || t == "off") return false;
  return Bad(*v, name, "0|1|true|false|yes|no|on|off");
}

namespace {

Expected<uint64_t> Number(const Reader::Value& v, const char* name, uint64_t max, bool size_suffix) {
  const std::string& t = v.text;
  const std::string what =
      size_suffix ? "a number with an optional K, M or G suffix" : "a non-negative number";
  if (t.empty() || t[0] < '0' || t[0] > '9') return Bad(v, name, what);
  errno = 0;
  char* end = nullptr;
  unsigned long long n = std::strtoull(t.c_str(), &end, 10);
  if (errno) return Bad(v, name, what + " of at most " + std::to_string(max));
  uint64_t mult = 1;
  std::string rest(end);
  if (size_suffix && (rest == "K" || rest == "k" || rest == "KiB")) {
    mult = 1ull << 10;
  } else if (size_suffix && (rest == "M" || rest == "MiB")) {
    mult = 1ull << 20;
  } else if (size_suffix && (rest == "G" || rest == "GiB")) {
    mult = 1ull << 30;
  } else if (!rest.empty()) {
    return Bad(v, name, what);
  }
  if (n > max / mult) return Bad(v, name, "at most " + std::to_string(max));
  return static_cast<uint64_t>(n * mult);
}

}  // namespace

Expected<uint64_t> Reader::UInt(const char* name) const {
  auto v = ValueOrDefault(*this, name);
  if (!v) return uint64_t{0};
  return Number(*v, name, MaxOf(name), false);
}

Expected<uint64_t> Reader::Bytes(const char* name) const {
  auto v = ValueOrDefault(*this, name);
  if (!v) return uint64_t{0};
  return Number(*v, name, MaxOf(name), true);
}

Expected<std::string> Reader::Choice(const char* name) const {
  auto v = ValueOrDefault(*this, name);
  if (!v) return std::string();
  const Setting* s = Find(name);
  if (!s || !s->accepted) return v->text;
  std::string_view acc = s->accepted;
  size_t start = 0;
  while (start <= acc.size()) {
    size_t bar = acc.find('|', start);
    if (bar == std::string_view::npos) bar = acc.size();
    if (acc.substr(start, bar - start) == v->text) return v->text;
    start = bar + 1;
  }
  return Bad(*v, name, s->accepted);
}

const Reader& Env() {
  static const Reader reader;
  return reader;
}

bool RequireOffload() {
  auto v = Env().Bool("INCIN_REQUIRE_OFFLOAD");
  return !v.ok() || *v;
}

Status OffloadRequiredError(const std::string& what, const std::string& fallback, const std::string& reason,
                            const std::string& detail) {
  return FailedPrecondition("INCIN_REQUIRE_OFFLOAD is set: " + what + " would fall back to " + fallback +
                            " (reason=" + reason + (detail.empty() ? "" : ": " + detail) + ")");
}

Expected<uint64_t> ParseNumber(const std::string& name, const std::string& text, uint64_t max,
                               bool size_suffix) {
  return Number(Reader::Value{text, name}, name.c_str(), max, size_suffix);
}

Expected<bool> ParseBool(const std::string& name, const std::string& text) {
  Reader r([&](const char* n) { return n == name ? text.c_str() : nullptr; }, nullptr);
  return r.Bool(name.c_str());
}

}  // namespace inc::settings
