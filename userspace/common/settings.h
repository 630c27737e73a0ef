// SPDX-License-Identifier: Apache-2.0
// incin's settings vocabulary: one table of every environment variable any
// front end reads (libinc, libincmpi, coll/incin, the NCCL plugin, the torch
// backend, incinctl), all named INCIN_*: common ones without a front-end
// infix (INCIN_AM, INCIN_TLS_CERT, INCIN_JOB_ID, INCIN_REQUIRE_OFFLOAD, ...),
// front-end ones with MPI_, TORCH_ or NCCL_ (INCIN_MPI_MIN_BYTES, ...).
//
// The names of the previous release (INCMPI_*, INC_*) still work for one
// release: reading a setting under its old name logs one deprecation
// warning per old name per process naming the new one; when the new and an
// old name are both set, the new one wins and the warning says so. Typed
// getters reject bad values with an INVALID_ARGUMENT naming the variable
// as set, its value and what is accepted. docs/operations.md "Settings"
// lists the table.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace inc::settings {

enum class Type {
  kString,
  kBool,   // 1|0|true|false|yes|no|on|off
  kUInt,   // a decimal number, at most Setting::max
  kBytes,  // a decimal number with an optional K, M or G (binary) suffix, at most Setting::max
  kChoice  // one of Setting::accepted ("a|b|c")
};

struct Setting {
  const char* name;                    // INCIN_...
  std::vector<const char*> old_names;  // previous release's names, first one first
  Type type;
  const char* default_value;  // what an unset or empty variable means to the typed getters; "" = none
  const char* accepted;       // kChoice: "a|b|c"; otherwise nullptr
  uint64_t max;               // kUInt, kBytes
  const char* front_end;      // "common", "mpi", "torch", "nccl", "cli"
  const char* doc;
};

// Every setting, common ones first.
const std::vector<Setting>& Table();

// The setting named `name` (its INCIN_ name), or null.
const Setting* Find(std::string_view name);

// The setting whose old name is `name`, or null.
const Setting* FindByOldName(std::string_view name);

// Whether `name` is a setting's name or one of its old names.
bool IsKnownName(std::string_view name);

// INCIN_* and INCMPI_* names in an environ-style list that name no setting
// (typos, most likely), for a warning.
std::vector<std::string> UnknownNames(char** environ_list);

// getenv-like; nullptr = unset. Unset and empty both mean "not set".
using EnvLookup = std::function<const char*(const char*)>;
// Receives each deprecation warning's text.
using WarnSink = std::function<void(const std::string&)>;

// Reads settings from an environment.
class Reader {
 public:
  // The process environment; deprecation warnings go to the log (warn),
  // once per old name per process.
  Reader();
  // `env` instead of the environment; warnings to `warn` (nullptr: none),
  // once per old name per Reader (copies share the record).
  Reader(EnvLookup env, WarnSink warn);

  // Where a setting's value came from.
  struct Value {
    std::string text;
    std::string from;  // the variable that was read: the new name or an old one
  };
  // The text of setting `name` (INCIN_ name), under the new name if set and
  // not empty, else under the first old name that is; nullopt when none is.
  // A name that is not in the table is read as is, without old names.
  std::optional<Value> Raw(const char* name) const;
  bool IsSet(const char* name) const { return Raw(name).has_value(); }

  // Typed getters: the value, the table's default when unset (String: ""
  // when the setting has none), INVALID_ARGUMENT for a bad value.
  Expected<std::string> String(const char* name) const;
  Expected<bool> Bool(const char* name) const;
  Expected<uint64_t> UInt(const char* name) const;
  Expected<uint64_t> Bytes(const char* name) const;
  Expected<std::string> Choice(const char* name) const;

 private:
  struct Warned;
  EnvLookup env_;
  WarnSink warn_;
  std::shared_ptr<Warned> warned_;
};

// The process environment's reader (warnings to the log, once per process).
const Reader& Env();

// INCIN_REQUIRE_OFFLOAD in the process environment; a bad value counts as
// set (a job that asked for offload in a garbled way still gets errors
// instead of silent fallbacks).
bool RequireOffload();

// The error a front end returns instead of falling back when offload is
// required: FAILED_PRECONDITION "INCIN_REQUIRE_OFFLOAD is set: <what> would
// fall back to <fallback> (reason=<reason>[: <detail>])".
Status OffloadRequiredError(const std::string& what, const std::string& fallback, const std::string& reason,
                            const std::string& detail = "");

// Bytes' and UInt's number syntax, for settings read from elsewhere (MCA
// parameters, backend options): `name` appears in the error.
Expected<uint64_t> ParseNumber(const std::string& name, const std::string& text, uint64_t max,
                               bool size_suffix);
Expected<bool> ParseBool(const std::string& name, const std::string& text);

}  // namespace inc::settings
